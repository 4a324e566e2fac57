# SPDX-License-Identifier: Apache-2.0
"""What every tutorial port is made of: a ``Port`` (one step of one tutorial, in one spelling)
with its inputs, its NumPy reference, its polyloop schedule and its TVM 0.27 module.

A port's ``polyloop`` builds what ``pl.build`` takes (a Schedule, a tensor, a kernel); its
``tvm`` takes the ``tvm`` module and returns an IRModule (or a PrimFunc) for ``tvm.compile``.
``differs`` says where polyloop's spelling differs from the tutorial's, and why; the TVM
translation's own differences (TVM 0.27 has no TE schedules: a TE tutorial is written with the
TensorIR primitives that do the same) are in ``tvm_differs``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Arrays = list[np.ndarray]


@dataclass(frozen=True)
class Out:
    """One output of a port: its shape (with the sizes of this run) and dtype."""
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True)
class Port:
    tutorial: str
    step: str
    spelling: str                       # "TE", "TensorIR", "TVMScript" or "" (one spelling)
    inputs: Callable[[np.random.Generator], Arrays]
    outputs: tuple[Out, ...]
    reference: Callable[..., np.ndarray | Sequence[np.ndarray]]
    polyloop: Callable[[], Any]
    tvm: Callable[[Any], Any] | None
    differs: str = ""
    tvm_differs: str = ""
    rtol: float = 1e-4
    atol: float = 1e-4

    @property
    def name(self) -> str:
        spelled = f" [{self.spelling}]" if self.spelling else ""
        return f"{self.step}{spelled}"


def rand(*shape: int, dtype: str = "float32") -> Callable[[np.random.Generator], np.ndarray]:
    """Uniform values in [-0.5, 0.5) of ``shape`` (integers in [-8, 8) for an integer dtype)."""
    def make(rng: np.random.Generator) -> np.ndarray:
        if np.dtype(dtype).kind in "iu":
            return rng.integers(-8, 8, size=shape).astype(dtype)
        return (rng.random(shape) - 0.5).astype(dtype)
    return make


def inputs_of(*makers: Callable[[np.random.Generator], np.ndarray]
              ) -> Callable[[np.random.Generator], Arrays]:
    return lambda rng: [m(rng) for m in makers]


def as_list(result: np.ndarray | Sequence[np.ndarray]) -> Arrays:
    return [result] if isinstance(result, np.ndarray) else list(result)


def check(port: Port, tool: str, got: Arrays, inputs: Arrays) -> None:
    """Raise AssertionError naming the port and tool unless ``got`` matches the reference."""
    want = as_list(port.reference(*inputs))
    assert len(got) == len(want), f"{port.tutorial} / {port.name}: {tool} gave {len(got)} outputs"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or not np.allclose(g, w, rtol=port.rtol, atol=port.atol):
            err = (float(np.nanmax(np.abs(g.astype(np.float64) - w))) if g.shape == w.shape
                   else f"shape {g.shape} vs {w.shape}")
            raise AssertionError(f"{port.tutorial} / {port.name}: {tool} output {k} is wrong "
                                 f"(max abs error {err})")


def poisoned(outs: Sequence[Out]) -> Arrays:
    """Output arrays every element of which a kernel must write (NaN, or the dtype's minimum)."""
    out = []
    for o in outs:
        dt = np.dtype(o.dtype)
        fill = np.nan if dt.kind == "f" else np.iinfo(dt).min
        out.append(np.full(o.shape, fill, dt))
    return out


def fastest(candidates: Sequence[Any], seconds: Callable[[Any], float]) -> Any:
    """The candidate with the least ``seconds(candidate)`` (one measurement each): the search a
    tuning tutorial runs over its space, done the same way for both tools."""
    timed = [(seconds(c), k) for k, c in enumerate(candidates)]
    return candidates[min(timed)[1]]


def polyloop_seconds(sch: Any, inputs: Arrays, repeat: int = 2) -> float:
    """Least time of a few calls of ``pl.build(sch)`` on ``inputs``."""
    import time
    import polyloop as pl
    mod = pl.build(sch)
    mod(*inputs)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        mod(*inputs)
        best = min(best, time.perf_counter() - start)
    return best


def tvm_seconds(tvm: Any, module: Any, inputs: Arrays, outputs: Sequence[Out],
                repeat: int = 2) -> float:
    """Least time of a few calls of TVM's build of ``module`` (one thread) on ``inputs``."""
    import time
    from polyloop.bench.tvm_ref import tvm_target
    lib = tvm.compile(module, target=tvm_target(1))
    args = [tvm.runtime.tensor(a) for a in inputs] + [
        tvm.runtime.tensor(np.zeros(o.shape, o.dtype)) for o in outputs]
    lib(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        lib(*args)
        best = min(best, time.perf_counter() - start)
    return best
