# SPDX-License-Identifier: Apache-2.0
"""The C entry of a compiled model: runs every kernel in order on preallocated buffers.

``int32_t NAME(void **args, const int64_t *params)`` with ``args`` = the inputs, the outputs,
then the workspace (``NAME_workspace_bytes(params)`` bytes, 64-byte aligned); ``params`` = the
size parameters in the graph's order. The weights are embedded in the library (``.incbin`` of
a blob written next to the generated sources). When ``NAME_profiling`` is non-zero each step's
time is added to ``NAME_step_ns``. Consecutive kernels run in one OpenMP parallel region,
their parallel loops shared among its threads (``graph/team.py``).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..codegen.team import TEAM_SIGNATURE, TeamRole, team_symbol
from ..errors import PolyloopError
from .ir import Graph, Value
from .memory import MemoryPlan, Where
from .team import TEAM_INCLUDES, TEAM_RUNTIME, region_lines, team_runs

ALIGN = 64


@dataclass(frozen=True, slots=True)
class Step:
    """One kernel call of the entry: its C function, argument values (the last ``outputs``
    of them written), size parameters and role in a parallel region (``codegen.team``)."""

    function: str
    args: tuple[Value, ...]
    params: tuple[str, ...]
    outputs: int = 1
    role: TeamRole = TeamRole.ALONE


def weight_blob(g: Graph) -> tuple[bytes, list[int]]:
    """All constants in one blob, each at a 64-byte aligned offset."""
    parts, offsets, pos = [], [], 0
    for c in g.constants:
        pad = -pos % ALIGN
        parts.append(b"\0" * pad)
        pos += pad
        offsets.append(pos)
        raw = np.ascontiguousarray(c.data).tobytes()
        parts.append(raw)
        pos += len(raw)
    return b"".join(parts), offsets


def _c_size(v: Value) -> str:
    factors = [str(d) for d in v.type.shape] + [str(np.dtype(v.type.dtype).itemsize)]
    return " * ".join(f"(int64_t){f}" for f in factors)


def _pointer(v: Value, plan: MemoryPlan, n_inputs: int, offsets: list[int], sym: str) -> str:
    s = plan.storage[v.name]
    if s.where is Where.INPUT:
        return f"args[{s.index}]"
    if s.where is Where.OUTPUT:
        return f"args[{n_inputs + s.index}]"
    if s.where is Where.CONST:
        return f"(void *)({sym} + {offsets[s.index]})"
    return f"(void *)(ws + off[{s.index}])"


def _plan_lines(name: str, g: Graph, plan: MemoryPlan) -> Iterator[str]:
    yield f"static int64_t {name}_offsets(const int64_t *params, int64_t *off) {{"
    for k, p in enumerate(g.params):
        yield f"    const int64_t {p} = params[{k}]; (void){p};"
    yield "    int64_t pos = 0, size;"
    for k, values in enumerate(plan.slots):
        yield f"    off[{k}] = pos; size = 0;"
        for v in values:
            yield f"    if ({_c_size(v)} > size) size = {_c_size(v)};"
        yield f"    pos += (size + {ALIGN - 1}) / {ALIGN} * {ALIGN};"
    yield "    return pos;"
    yield "}"


def entry_source(name: str, g: Graph, plan: MemoryPlan, steps: list[Step],
                 blob_path: str, offsets: list[int]) -> str:
    """The C source of the model entry (see the module docstring)."""
    if any(ch in blob_path for ch in '"\\\n'):
        raise PolyloopError(f"the weight file path {blob_path!r} contains a quote, backslash or "
                            "newline; set POLYLOOP_CACHE_DIR to a plain directory")
    sym = f"{name}_weights"
    n_in, n_out = len(g.inputs), len(g.outputs)
    lines = [f"#include <{h}>" for h in ("stdint.h", "time.h", *TEAM_INCLUDES)] + [""]
    for s in dict((s.function, s) for s in steps).values():
        lines.append(f"int32_t {s.function}(void **args, const int64_t *params);")
        if s.role is TeamRole.SHARED:
            lines.append(f"{TEAM_SIGNATURE.format(name=team_symbol(s.function))};")
    lines += [f'__asm__(".section .rodata\\n.balign {ALIGN}\\n{sym}:\\n.incbin \\"{blob_path}\\"'
              f'\\n.previous");',
              f"extern const char {sym}[] __attribute__((visibility(\"hidden\")));",
              f"int32_t {name}_profiling = 0;",
              f"int64_t {name}_step_ns[{max(len(steps), 1)}];", ""]
    lines += list(_plan_lines(name, g, plan))
    lines += ["", f"int64_t {name}_workspace_bytes(const int64_t *params) {{",
              f"    int64_t off[{max(len(plan.slots), 1)}];",
              f"    return {name}_offsets(params, off);", "}", "",
              "static int64_t pl_now_ns(void) {",
              "    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);",
              "    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;", "}",
              *TEAM_RUNTIME.splitlines(), "",
              f"int32_t {name}(void **args, const int64_t *params) {{",
              f"    char *ws = (char *)args[{n_in + n_out}]; (void)ws;",
              f"    int64_t off[{max(len(plan.slots), 1)}];",
              f"    {name}_offsets(params, off);",
              "    int32_t status; int64_t t0 = 0;"]
    for k, p in enumerate(g.params):
        lines.append(f"    const int64_t {p} = params[{k}]; (void){p};")

    def call(s: Step) -> tuple[str, str]:
        ptrs = ", ".join(_pointer(v, plan, n_in, offsets, sym) for v in s.args)
        return f"void *a[] = {{{ptrs}}};", \
            f"const int64_t p[] = {{{', '.join(s.params) if s.params else '0'}}};"

    for run in team_runs([s.role for s in steps]):
        if any(steps[k].role is TeamRole.SHARED for k in run):
            lines += region_lines(name, steps, run, plan, call)
            continue
        for k in run:
            arrays, params = call(steps[k])
            lines += ["    {", f"        {arrays}", f"        {params}",
                      f"        if ({name}_profiling) t0 = pl_now_ns();",
                      f"        status = {steps[k].function}(a, p);",
                      f"        if ({name}_profiling) {name}_step_ns[{k}] += pl_now_ns() - t0;",
                      "        if (status) return status;",
                      "    }"]
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)
