# SPDX-License-Identifier: Apache-2.0
"""The C header of an exported model library."""
from __future__ import annotations

import re

from .ir import Graph


def model_header(g: Graph, entry: str) -> str:
    """A header declaring the model entry and its workspace size function."""
    macro = re.sub(r"[^A-Za-z0-9]", "_", entry).upper()
    n_in, n_out = len(g.inputs), len(g.outputs)
    lines = [f"/* {entry}: a model compiled by polyloop (weights embedded).", " *",
             f" * int32_t status = {entry}(args, params);  0: success, 1: out of memory",
             " * args: the inputs, the outputs, then a workspace of",
             f" *   {entry}_workspace_bytes(params) bytes, 64-byte aligned; arrays C-contiguous."]
    for k, v in enumerate(g.inputs):
        lines.append(f" *   args[{k}] = input {v.name}: {v.type}")
    for k, v in enumerate(g.outputs):
        lines.append(f" *   args[{n_in + k}] = output {v.name}: {v.type}")
    lines.append(f" *   args[{n_in + n_out}] = workspace")
    lines.append(" * params: the size parameters, in this order:")
    lines += [f" *   params[{k}] = {p}" for k, p in enumerate(g.params)] or [" *   (none)"]
    lines += [" * Not reentrant on one workspace: give each concurrent call its own.", " */",
              f"#ifndef POLYLOOP_{macro}_H", f"#define POLYLOOP_{macro}_H", "",
              "#include <stdint.h>", "", "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
              f"#define {macro}_NUM_INPUTS {n_in}", f"#define {macro}_NUM_OUTPUTS {n_out}",
              f"#define {macro}_NUM_PARAMS {len(g.params)}",
              f"int64_t {entry}_workspace_bytes(const int64_t *params);",
              f"int32_t {entry}(void **args, const int64_t *params);", "",
              "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* POLYLOOP_{macro}_H */", ""]
    return "\n".join(lines)
