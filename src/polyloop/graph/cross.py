# SPDX-License-Identifier: Apache-2.0
"""CrossModel: a model compiled for another machine (``pl.graph.build(g, target="c
-mtriple=aarch64-linux-gnu")``).

The library is the one an ``Executor`` would load (one C entry, weights embedded), built by
the target's cross compiler. Here it can be exported, and its inputs checked (``bind``) before
they are sent to a device over RPC (``polyloop.rpc``); calling it raises a PolyloopError that
says how to run it there.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, PolyloopError
from ..runtime.compiler import Library
from ..runtime.header import export_files
from ..runtime.target import Target
from .executor import _as_array, check_indices, input_sizes
from .index_checks import IndexCheck, index_checks
from .export import model_header
from .ir import Graph
from .memory import MemoryPlan


def bind_model_inputs(g: Graph, checks: list[IndexCheck], inputs: tuple
                      ) -> tuple[list[np.ndarray], list[int],
                                 list[tuple[tuple[int, ...], np.dtype]]]:
    """Check the inputs of one run of ``g`` as ``Executor`` does; the inputs as C-contiguous
    arrays, the size parameters in the entry's order and the outputs' shapes and dtypes.
    ``checks``: ``index_checks.index_checks(g)``."""
    if len(inputs) != len(g.inputs):
        raise ArgumentError(f"model '{g.name}' takes {len(g.inputs)} inputs "
                            f"({', '.join(v.name for v in g.inputs)}), got {len(inputs)}")
    arrays = [np.ascontiguousarray(_as_array(x, v.name)) for v, x in zip(g.inputs, inputs)]
    sizes = input_sizes(g, arrays)
    if checks:
        check_indices(g, checks, arrays)
    params = [sizes.get(p, 0) for p in g.params]
    outputs = [(v.type.concrete(sizes), np.dtype(v.type.dtype)) for v in g.outputs]
    return arrays, params, outputs


class CrossModel:
    """A compiled model for ``target``'s machine; see the module docstring.

    >>> ex = pl.graph.build(g, target="c -mtriple=aarch64-linux-gnu")   # doctest: +SKIP
    >>> ex.export_library("model.so")                                     # doctest: +SKIP
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, library: Library, entry: str,
                 target: Target) -> None:
        self.graph, self.plan, self.library, self.entry = graph, plan, library, entry
        self.target = str(target)
        self.target_object = target
        self._index_checks = index_checks(graph)

    @property
    def workspace_symbol(self) -> str:
        """The library's function that gives the workspace's byte count for the sizes."""
        return f"{self.entry}_workspace_bytes"

    def bind(self, inputs: tuple) -> tuple[list[np.ndarray], list[int],
                                           list[tuple[tuple[int, ...], np.dtype]]]:
        """Check the inputs of one run as ``Executor`` does (see ``bind_model_inputs``)."""
        return bind_model_inputs(self.graph, self._index_checks, inputs)

    def __call__(self, *inputs: object) -> object:
        raise self._elsewhere("run")

    def benchmark(self, *inputs: object, **options: object) -> float:
        """Refused: the model runs on its device (see ``polyloop.rpc``)."""
        raise self._elsewhere("timed")

    def export_library(self, path: str | PathLike) -> tuple[Path, Path]:
        """Write the model as a shared library for its machine (weights embedded) and a C
        header next to it, as ``Executor.export_library`` does."""
        return export_files(self.library.path, path, self.entry,
                            model_header(self.graph, self.entry))

    def _elsewhere(self, what: str) -> PolyloopError:
        return PolyloopError(
            f"model '{self.graph.name}' was built for '{self.target}' and cannot be {what} on "
            "this machine; run it on the device over RPC: remote = pl.rpc.connect(host, port), "
            "f = remote.load_module(remote.upload(model)), then f(x) or f.benchmark(x) (or "
            "export it with model.export_library(path))")

    def __repr__(self) -> str:
        return f"<CrossModel {self.graph.name} target={self.target!r} library={self.library.path}>"
