# SPDX-License-Identifier: Apache-2.0
"""The executor of a compiled graph: one shared library, one C entry per run of kernels.

Python binds the arguments once per call and calls the entry, which runs every kernel in order
on the caller's arrays, the embedded weights and one preallocated workspace. Only an extern
call (a Python function) splits the kernels into several entries.
"""
from __future__ import annotations

import ctypes
import shutil
import statistics
import time
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np

from .. import config
from ..errors import ArgumentError, PolyloopError
from ..runtime.compiler import Library
from ..runtime.module import apply_thread_count
from ..runtime.openmp import load_library
from ..util.aligned import aligned_bytes
from .bfloat16 import bf16_kernels, precision_lines
from .entry import ALIGN
from .export import model_header
from .index_checks import IndexCheck, index_checks
from .ir import ExternCall, Graph
from .memory import MemoryPlan, Where, nbytes


@dataclass(slots=True)
class Segment:
    """Kernels run by one C entry, or one extern call."""

    steps: tuple = ()
    labels: tuple[str, ...] = ()
    extern: ExternCall | None = None
    entry: str | None = None
    function: object = None      # the extern's Python function, looked up at build time


@dataclass(frozen=True, slots=True)
class _Shapes:
    """What a set of input shapes gives: the sizes, the outputs' shapes and dtypes, the
    workspace and the size parameters as C integers."""

    sizes: dict[str, int]
    outputs: tuple[tuple[tuple[int, ...], np.dtype], ...]
    workspace: np.ndarray
    workspace_address: int
    params_c: object


# Input shapes remembered per executor (a model called with ever new batch sizes starts over).
_MAX_SHAPES = 64


def _as_array(x: object, name: str) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack__"):
        detach = getattr(x, "detach", None)
        return np.from_dlpack(detach() if detach is not None else x)
    raise ArgumentError(f"input '{name}': expected a NumPy array or a DLPack tensor, got "
                        f"{type(x).__name__}")


def input_sizes(g: Graph, arrays: list[np.ndarray]) -> dict[str, int]:
    """The size parameters the inputs' shapes give; ArgumentError for a wrong dtype, rank or
    size (a size parameter is at least 1 and the same wherever it appears)."""
    sizes: dict[str, int] = {}
    for v, a in zip(g.inputs, arrays):
        if a.dtype != np.dtype(v.type.dtype):
            raise ArgumentError(f"input '{v.name}': expected dtype {v.type.dtype}, got "
                                f"{a.dtype}; convert with .astype('{v.type.dtype}')")
        if a.ndim != len(v.type.shape):
            raise ArgumentError(f"input '{v.name}': expected shape {v.type}, got {a.shape}")
        for d, n in zip(v.type.shape, a.shape):
            expected = sizes.setdefault(d, n) if isinstance(d, str) else d
            if expected != n or n < 1:
                raise ArgumentError(f"input '{v.name}': expected shape {v.type} "
                                    f"(sizes {sizes}), got {a.shape}")
    _apply_size_rules(g, sizes)
    return sizes


def _apply_size_rules(g: Graph, sizes: dict[str, int]) -> None:
    """Compute the derived sizes and check every size against its range."""
    for rule in g.size_rules:
        if rule.terms:
            sizes[rule.name] = rule.value(sizes)
        n = sizes.get(rule.name)
        if n is None:
            continue
        if n < rule.low or (rule.high is not None and n > rule.high):
            given = ", ".join(f"{k}={v}" for k, v in sizes.items() if k != rule.name)
            raise ArgumentError(f"model '{g.name}': size {rule.name} = {n} (inputs give "
                                f"{given}) is outside what the model was imported for: {rule}")


def check_indices(g: Graph, checks: list[IndexCheck], arrays: list[np.ndarray]) -> None:
    """ArgumentError when an input read as indices (``index_checks.index_checks(g)``) holds
    one outside its axis."""
    by_name = {v.name: a for v, a in zip(g.inputs, arrays)}
    for check in checks:
        a = by_name.get(check.name)
        if a is not None:
            check.check(a)


class Executor:
    """A compiled model: ``ex(*inputs)`` returns the outputs as NumPy arrays.

    >>> ex = pl.graph.build(graph); y = ex(x)   # doctest: +SKIP
    >>> ex.benchmark(x); print(ex.profile(x))    # doctest: +SKIP
    """

    def __init__(self, graph: Graph, plan: MemoryPlan, library: Library,
                 segments: list[Segment], *, blob_path: str) -> None:
        self.graph, self.plan, self.library = graph, plan, library
        self.segments = segments
        self.blob_path = blob_path
        self._cdll = load_library(library.path)
        apply_thread_count(self._cdll, config.CONFIG.num_threads)
        self._fns = {}
        for s in segments:
            if s.entry is not None:
                fn = getattr(self._cdll, s.entry)
                fn.restype = ctypes.c_int32
                fn.argtypes = (ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64))
                self._fns[s.entry] = fn
        self._workspaces: dict[tuple, np.ndarray] = {}
        self._shapes: dict[tuple, _Shapes] = {}
        self._index_checks = index_checks(graph)

    @property
    def source_dir(self) -> Path:
        return self.library.path.parent

    # binding -----------------------------------------------------------------------------------
    def _bind(self, inputs: tuple) -> tuple[list[np.ndarray], _Shapes]:
        """The inputs as C-contiguous arrays, and what their shapes give (checked once per
        distinct set of shapes and dtypes, then looked up)."""
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise ArgumentError(f"model '{g.name}' takes {len(g.inputs)} inputs "
                                f"({', '.join(v.name for v in g.inputs)}), got {len(inputs)}")
        arrays = [x if type(x) is np.ndarray else _as_array(x, v.name)
                  for v, x in zip(g.inputs, inputs)]
        key = tuple((a.shape, a.dtype) for a in arrays)
        shapes = self._shapes.get(key)
        if shapes is None:
            shapes = self._check_shapes(arrays)
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()
            self._shapes[key] = shapes
        arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
        if self._index_checks:
            check_indices(g, self._index_checks, arrays)
        return arrays, shapes

    def _check_shapes(self, arrays: list[np.ndarray]) -> _Shapes:
        g = self.graph
        sizes = input_sizes(g, arrays)
        params = [sizes.get(p, 0) for p in g.params]
        ws = self._workspace(sizes)
        return _Shapes(sizes, tuple((v.type.concrete(sizes), np.dtype(v.type.dtype))
                                    for v in g.outputs),
                       ws, ws.ctypes.data, (ctypes.c_int64 * max(len(params), 1))(*params))

    def _workspace(self, sizes: dict[str, int]) -> np.ndarray:
        key = tuple(sizes.get(p, 0) for p in self.graph.params)
        if key not in self._workspaces:
            total = sum(self._slot_sizes(sizes))
            self._workspaces[key] = aligned_bytes(total, ALIGN, zeros=True)
        return self._workspaces[key]

    def _slot_sizes(self, sizes: dict[str, int]) -> list[int]:
        return [-(-max(nbytes(v, sizes) for v in vs) // ALIGN) * ALIGN for vs in self.plan.slots]

    def _prepare(self, inputs: tuple, given: tuple | None = None):
        arrays, shapes = self._bind(inputs)
        outs = [np.empty(shape, dtype) for shape, dtype in shapes.outputs]
        if given is not None:
            outs = self._check_outputs(outs, given)
        pointers = [a.ctypes.data for a in (*arrays, *outs)]
        pointers.append(shapes.workspace_address)
        args_c = (ctypes.c_void_p * len(pointers))(*pointers)
        return arrays, outs, shapes.workspace, shapes.sizes, args_c, shapes.params_c

    def _check_outputs(self, expected: list[np.ndarray], given: tuple) -> list[np.ndarray]:
        if len(given) != len(expected):
            raise ArgumentError(f"model '{self.graph.name}' has {len(expected)} outputs, "
                                f"out= gave {len(given)}")
        for v, e, a in zip(self.graph.outputs, expected, given):
            if not isinstance(a, np.ndarray) or a.shape != e.shape or a.dtype != e.dtype \
                    or not a.flags.c_contiguous:
                raise ArgumentError(f"output '{v.name}': expected a C-contiguous {e.dtype} "
                                    f"array of shape {e.shape}, got {a!r:.60}")
        return list(given)

    # running -----------------------------------------------------------------------------------
    def _value(self, name: str, arrays, outs, ws, sizes) -> np.ndarray:
        s = self.plan.storage[name]
        v = next(v for b in self.graph.bindings for v in (*b.inputs, *b.outputs)
                 if v.name == name)
        shape = v.type.concrete(sizes)
        if s.where is Where.INPUT:
            return arrays[s.index].reshape(shape)
        if s.where is Where.OUTPUT:
            return outs[s.index].reshape(shape)
        if s.where is Where.CONST:
            return self.graph.constants[s.index].data.reshape(shape)
        start = sum(self._slot_sizes(sizes)[:s.index])
        count = int(np.prod(shape, dtype=np.int64))
        return ws[start:].view(v.type.dtype)[:count].reshape(shape)

    def _run(self, prepared) -> None:
        arrays, outs, ws, sizes, args_c, params_c = prepared
        for s in self.segments:
            if s.entry is not None:
                status = self._fns[s.entry](args_c, params_c)
                if status:
                    raise PolyloopError(f"model '{self.graph.name}' failed with status {status} "
                                        "(1: out of memory)")
                continue
            call = s.extern
            args = [self._value(v.name, arrays, outs, ws, sizes) for v in call.inputs]
            result = s.function(*args, **dict(call.attrs))
            results = result if isinstance(result, tuple) else (result,)
            if len(results) != len(call.outputs):
                raise PolyloopError(f"extern {call.name!r} returned {len(results)} results, "
                                    f"the graph expects {len(call.outputs)}")
            for v, r in zip(call.outputs, results):
                r = np.asarray(r)
                target = self._value(v.name, arrays, outs, ws, sizes)
                if r.shape != target.shape:
                    raise PolyloopError(f"extern {call.name!r} returned shape {r.shape}, the "
                                        f"graph expects {target.shape} for %{v.name}")
                target[...] = r

    def __call__(self, *inputs: object, out: tuple | None = None
                 ) -> np.ndarray | tuple[np.ndarray, ...]:
        """Run the model on ``inputs``; ``out=(arrays...)`` writes the outputs there."""
        prepared = self._prepare(inputs, out)
        self._run(prepared)
        outs = prepared[1]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def benchmark(self, *inputs: object, repeat: int = 20, warmup: int = 3) -> float:
        """Median seconds of one run of the model, after ``warmup`` runs."""
        prepared = self._prepare(inputs)
        for _ in range(warmup):
            self._run(prepared)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self._run(prepared)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def profile(self, *inputs: object, repeat: int = 10) -> str:
        """The median time of each fused kernel over ``repeat`` runs, their sum, and the median
        of whole runs (Python's binding included); the table is printed and returned. Medians,
        as in ``benchmark``: a run the OS interrupts does not skew them."""
        prepared = self._prepare(inputs)
        self._run(prepared)
        counters = [(s, (ctypes.c_int64 * max(len(s.labels), 1)).in_dll(
            self._cdll, f"{s.entry}_step_ns")) for s in self.segments if s.entry is not None]
        labels = [label for s, _ in counters for label in s.labels]
        samples: list[list[int]] = [[] for _ in labels]
        runs = []
        self._set_profiling(1)
        try:
            for _ in range(repeat):
                for _, ns in counters:
                    ctypes.memset(ns, 0, ctypes.sizeof(ns))
                start = time.perf_counter()
                self._run(self._prepare(inputs))
                runs.append(time.perf_counter() - start)
                values = [ns[k] for s, ns in counters for k in range(len(s.labels))]
                for sample, value in zip(samples, values):
                    sample.append(value)
        finally:
            self._set_profiling(0)
        rows = [(label, statistics.median(v) / 1e6) for label, v in zip(labels, samples)]
        total = sum(t for _, t in rows) or 1.0
        width = max([len(r[0]) for r in rows] + [12])
        lines = [f"{'kernel':<{width}}  {'ms':>9}  {'%':>5}"]
        lines += [f"{label:<{width}}  {ms:9.4f}  {100 * ms / total:5.1f}" for label, ms in rows]
        lines.append(f"{'total':<{width}}  {total:9.4f}")
        lines.append(f"{'call, median':<{width}}  {1e3 * statistics.median(runs):9.4f}")
        table = "\n".join(lines)
        print(table)
        return table

    def _set_profiling(self, on: int) -> None:
        for s in self.segments:
            if s.entry is not None:
                ctypes.c_int32.in_dll(self._cdll, f"{s.entry}_profiling").value = on

    def report(self) -> str:
        """The compiled kernels and the operator calls run outside generated code (fallbacks
        and registered externs), in the order the model runs them; printed and returned."""
        lines = []
        bf16 = bf16_kernels(self.graph)
        for s in self.segments:
            if s.entry is not None:
                lines += [f"kernel    {label}" + (" (bfloat16 products)" if label in bf16
                                                   else "") for label in s.labels]
                continue
            call = s.extern
            ref = dict(call.attrs).get("reference")
            outs = ", ".join(f"%{v.name}" for v in call.outputs)
            if call.name.startswith("fallback."):
                lines.append(f"fallback  {outs} = {ref.op} via {call.name.partition('.')[2]} "
                             f"({ref.where or 'top level'}; {ref.reason})")
            else:
                lines.append(f"extern    {outs} = {call.name}")
        n_k = sum(line.startswith("kernel") for line in lines)
        n_f = sum(line.startswith("fallback") for line in lines)
        lines.append(f"{n_k} compiled kernel(s), {n_f} fallback call(s), "
                     f"{len(lines) - n_k - n_f} extern call(s)")
        lines += precision_lines(self.graph)
        text = "\n".join(lines)
        print(text)
        return text

    def export_library(self, path: str | PathLike) -> tuple[Path, Path]:
        """Write the model as a shared library (weights embedded) and a C header next to it.

        >>> so, h = ex.export_library("build/model.so")   # doctest: +SKIP
        """
        if len(self.segments) != 1 or self.segments[0].entry is None:
            raise PolyloopError(f"model '{self.graph.name}' calls extern Python functions; a "
                                "library without Python cannot run it. Build it without "
                                "register_extern routes to export it")
        dest = Path(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.library.path, dest)
        header = dest.with_suffix(".h")
        header.write_text(model_header(self.graph, self.segments[0].entry))
        return dest, header
