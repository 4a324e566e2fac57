# SPDX-License-Identifier: Apache-2.0
"""The benchmark workloads of `polyloop bench`: what polyloop builds, what the references run, and the
goal each is held to.

A workload is data: its inputs, a polyloop builder (the operator library's te builder and
schedule), a NumPy reference (always used to check the result; timed only where NumPy has a
natural expression of the operator), the PyTorch call, the work it counts and its goal.
Operators that ``polyloop.ops`` does not provide yet are listed with no builder ("schedule not
available yet").

Shapes: matmul ``m x n x k`` is ``C (m, n) = A (m, k) @ B (k, n)``; batched matmul ``b x m x n x
k``; convolutions NCHW with ``K`` output channels, 3 x 3 filters, stride 1, padding 1.

>>> from polyloop.bench.workloads import select, WORKLOADS
>>> [w.key for w in select(["softmax"], WORKLOADS)]
['softmax-4096']
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .. import intrin, ops
from ..driver import build
from ..errors import ArgumentError
from ..frontend import te
from ..runtime import Module
from .goals import Goal, at_least


@dataclass(frozen=True, slots=True)
class Workload:
    """One benchmark row. ``make`` builds the polyloop module (None: no schedule yet)."""

    key: str                                   # what a user types: "matmul-1024"
    group: str                                 # "matmul", "conv2d", ...
    shape: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    make: Callable[..., Module] | None         # make(profile=...): options of build()
    reference: Callable[..., np.ndarray]       # NumPy: the checked result
    numpy_timed: bool                          # is ``reference`` a fair NumPy timing?
    torch: Callable[..., object] | None        # (torch, *tensors) -> tensor
    work: float                                # FLOPs, or bytes for a bandwidth-bound workload
    unit: str                                  # "GFLOP/s" or "GB/s"
    goal: Goal
    tvm: str | None = None                     # name of the TVM reference (bench.tvm_ref)
    rtol: float = 1e-4
    atol: float = 1e-4


# --- NumPy references ---------------------------------------------------------------------------

def numpy_bmm_relu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(np.matmul(a, b), 0)


def numpy_conv2d(x: np.ndarray, w: np.ndarray, pad: int = 1) -> np.ndarray:
    """NCHW convolution, stride 1 (float64 accumulation: the checked reference)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,kcrs->nkhw", win, w.astype(np.float64), optimize=True)


def numpy_depthwise(x: np.ndarray, w: np.ndarray, pad: int = 1) -> np.ndarray:
    """Depthwise NCHW convolution, weight (C, 1, R, S), stride 1."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwrs,crs->nchw", win, w[:, 0].astype(np.float64))


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# --- polyloop builders ----------------------------------------------------------------------------

def _builder(op: str, schedule: str, shapes: Sequence[tuple[int, ...]],
             knobs: Callable[[], dict[str, object]] = dict,
             **kwargs: object) -> Callable[..., Module] | None:
    """``build(schedule(op(*placeholders, **kwargs), **knobs()))``, or None when
    ``polyloop.ops`` lacks the op."""
    make_op, make_sch = getattr(ops, op, None), getattr(ops, schedule, None)
    if make_op is None or make_sch is None:
        return None

    def make(**options: object) -> Module:
        names = "ABCDEFGH"
        args = [te.placeholder(s, "float32", name=names[i]) for i, s in enumerate(shapes)]
        return build(make_sch(make_op(*args, **kwargs), **knobs()), **options)
    return make


def matmul_knobs(m: int, n: int, k: int) -> dict[str, object]:
    """The hand-picked matmul schedule for a shape (pl.tune searches instead).

    When the columns divide into 64-wide panels, the register tile (6 x 64 accumulated over
    the whole k in registers) is used: nothing is loaded or stored for C inside the k loop.
    Otherwise the k-blocked micro-kernel schedule is used (tensorize: full tiles call the
    kernel, edge tiles run vector loops), with the host's tile that leaves the least work to
    the edges (1000 x 1000: 8 x 32 on AVX-512): measured 1.28x PyTorch against the register
    tile's 1.18x at 1000^3 (with full-tile isolation; 0.6x without it)."""
    if n % 64 == 0:
        return {}
    tiles = intrin.TILES[intrin.host_kind()]
    rows, cols = min(tiles, key=lambda t: ((m % t[0]) / m + (n % t[1]) / n, -t[0] * t[1]))
    return {"intrin": intrin.gemm_intrin(rows=rows, cols=cols), "kc": 256}


def _uniform(*shapes: tuple[int, ...]) -> Callable[[np.random.Generator], list[np.ndarray]]:
    return lambda rng: [rng.uniform(-1.0, 1.0, s).astype(np.float32) for s in shapes]


def matmul_workload(m: int, n: int, k: int, goal: Goal, key: str | None = None) -> Workload:
    return Workload(
        key=key or (f"matmul-{m}" if m == n == k else f"matmul-{m}x{n}x{k}"), group="matmul",
        shape=f"{m}x{n}x{k}", inputs=_uniform((m, k), (k, n)),
        make=_builder("matmul", "schedule_matmul", [(m, k), (k, n)],
                      knobs=lambda: matmul_knobs(m, n, k)),
        reference=np.matmul, numpy_timed=True, torch=lambda t, a, b: t.matmul(a, b),
        work=2.0 * m * n * k, unit="GFLOP/s", goal=goal, tvm="matmul",
        rtol=1e-4, atol=1e-5 * k)


def bmm_workload(batch: int, m: int, n: int, k: int, goal: Goal) -> Workload:
    return Workload(
        key="bmm-relu" if (batch, m, n, k) == (16, 128, 128, 128) else f"bmm-relu-{batch}x{m}",
        group="bmm-relu", shape=f"{batch}x{m}x{n}x{k}",
        inputs=_uniform((batch, m, k), (batch, k, n)),
        make=_builder("batch_matmul_relu", "schedule_batch_matmul_relu",
                      [(batch, m, k), (batch, k, n)]),
        reference=numpy_bmm_relu, numpy_timed=True,
        torch=lambda t, a, b: t.relu(t.bmm(a, b)), work=2.0 * batch * m * n * k,
        unit="GFLOP/s", goal=goal, atol=1e-5 * k)


def conv_workload(c: int, h: int, k: int, goal: Goal) -> Workload:
    return Workload(
        key=f"conv2d-{c}", group="conv2d", shape=f"(1,{c},{h},{h})->{k}",
        inputs=_uniform((1, c, h, h), (k, c, 3, 3)),
        make=_builder("conv2d_nchw", "schedule_conv2d_nchw", [(1, c, h, h), (k, c, 3, 3)], pad=1),
        reference=numpy_conv2d, numpy_timed=False,
        torch=lambda t, x, w: t.nn.functional.conv2d(x, w, padding=1),
        work=2.0 * k * c * 9 * h * h, unit="GFLOP/s", goal=goal, atol=1e-5 * c * 9)


def depthwise_workload(c: int, h: int, goal: Goal) -> Workload:
    return Workload(
        key=f"depthwise-{h}", group="depthwise", shape=f"(1,{c},{h},{h})",
        inputs=_uniform((1, c, h, h), (c, 1, 3, 3)),
        make=_builder("depthwise_conv2d_nchw", "schedule_depthwise_conv2d_nchw",
                      [(1, c, h, h), (c, 1, 3, 3)], pad=1),
        reference=numpy_depthwise, numpy_timed=False,
        torch=lambda t, x, w: t.nn.functional.conv2d(x, w, padding=1, groups=w.shape[0]),
        work=2.0 * c * 9 * h * h, unit="GFLOP/s", goal=goal, tvm="depthwise")


def softmax_workload(n: int, goal: Goal) -> Workload:
    return Workload(
        key=f"softmax-{n}", group="softmax", shape=f"{n}x{n}",
        inputs=lambda rng: [rng.standard_normal((n, n), dtype=np.float32)],
        make=_builder("softmax", "schedule_softmax", [(n, n)]),
        reference=numpy_softmax, numpy_timed=True, torch=lambda t, x: t.softmax(x, dim=1),
        work=2.0 * 4 * n * n, unit="GB/s", goal=goal, rtol=1e-5, atol=1e-6)


# --- the targets --------------------------------------------------------------------------------

_BIG = at_least(torch=0.9, numpy=1.3, peak=0.8)
# TVM "default" (no schedule) figures measured on a 2-core Xeon, used when TVM is not installed.
_TVM_DEPTHWISE_S = {21: 0.07e-3, 32: 0.15e-3, 64: 0.72e-3, 96: 1.69e-3}

WORKLOADS: tuple[Workload, ...] = (
    matmul_workload(512, 512, 512, at_least(torch=0.85)),
    matmul_workload(1024, 1024, 1024, _BIG),
    matmul_workload(2048, 2048, 2048, _BIG),
    matmul_workload(1000, 1000, 1000, at_least(torch=0.85)),
    matmul_workload(4096, 256, 1024, at_least(torch=0.85)),
    bmm_workload(16, 128, 128, 128, at_least(torch=1.0)),
    conv_workload(64, 56, 64, at_least(torch=1.5)),
    conv_workload(256, 14, 256, at_least(torch=0.9)),
    *(depthwise_workload(256, h, at_least(tvm=1.5, tvm_fallback_s=_TVM_DEPTHWISE_S[h]))
      for h in (21, 32, 64, 96)),
    softmax_workload(4096, at_least(triad=0.7)),
)

# --quick: tiny sizes that divide no tile, for smoke tests (no goals: "—").
QUICK: tuple[Workload, ...] = (
    matmul_workload(37, 45, 29, at_least(), key="matmul-37x45x29"),
    bmm_workload(2, 9, 17, 15, at_least()),
    conv_workload(3, 7, 5, at_least()),
    depthwise_workload(5, 7, at_least()),
    softmax_workload(33, at_least()),
)


def select(names: Sequence[str], pool: Sequence[Workload]) -> list[Workload]:
    """The workloads whose key or group is in ``names`` (all of ``pool`` when empty), in the
    pool's order. An unknown name raises ArgumentError listing the valid ones."""
    if not names:
        return list(pool)
    known = {w.key for w in pool} | {w.group for w in pool}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ArgumentError(f"unknown workload(s) {', '.join(unknown)}; choose among: "
                            + ", ".join(sorted(known)))
    return [w for w in pool if w.key in names or w.group in names]
