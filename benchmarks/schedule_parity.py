# SPDX-License-Identifier: Apache-2.0
"""The same schedule, written as a TVM user writes it, in polyloop and in Apache TVM 0.27.

    python benchmarks/schedule_parity.py                 # every case, 1 and 2 threads
    python benchmarks/schedule_parity.py --cases ladder --n 512 --rounds 5

Cases, each scheduled with the same primitives in both tools:
- ``ladder``: TVM's "How to optimize GEMM on CPU" at n^3 (default 1024), step by step:
  blocking (32 x 32 tiles, k split by 4), vectorize, loop permutation, array packing (B packed
  into 32-wide panels by an explicit stage), write cache (``cache_write(C, "global")`` computed
  at the tile, k's inner loop unrolled), parallel; plus ``polyloop.ops.schedule_matmul`` as the
  target for the last step, and the last step written by hand in C, loop for loop the same
  schedule (``ladder_by_hand``): it tells whether a gap to ``schedule_matmul`` is the generated
  code's or the schedule's;
- ``conv2d``: the MLC course's conv2d, (4, 8, 28, 28) x (32, 8, 3, 3), padding 1 inlined, batch
  and output channels fused and parallel, the output pixels fused, split by 16, vectorized, the
  kernel column loop unrolled;
- ``bmm_relu``: the MLC course's batched matmul + ReLU, 16 x 128^3 (j split by 8, k by 4 and
  unrolled, ReLU at the j tile, the batch parallel, init and ReLU vectorized);
- ``depthwise``: depthwise 3 x 3, (1, 256, 64, 64), padding inlined, channels parallel, rows
  split by 16 and vectorized, the kernel window unrolled;
- ``softmax``: softmax over the rows of a 1024 x 1024 matrix, every stage computed at the row
  loop, the row loop parallel, the element-wise loops split by 16 and vectorized.

Each figure is the least of ``--repeat`` timings (``polyloop.bench.peers.time_call``), best of
``--rounds`` rounds interleaved over all rows (the machine is shared: a burst of load then does
not land on one row only). ``ratio`` is TVM's time divided by polyloop's: >= 1 means polyloop
is at least as fast. Every result is checked against NumPy before it is timed. Without TVM
the TVM column says "not installed". ``--clock cpu --threads 1`` times the CPU time of the
calling thread instead of wall time (both tools run a one-thread kernel in the caller): on a
loaded machine it leaves out the time spent waiting for a core.

Both tools get the same 64-byte aligned arrays: TVM copies its inputs into tensors aligned to 64
bytes, while NumPy aligns large arrays to 16 bytes only, which makes every 32-byte vector load
of a row cross a cache line half of the time (bmm_relu ran 1.5x slower in polyloop on NumPy's
own arrays, with the same machine code). TVM's thread pool counts half the logical CPUs on x86
(it assumes two hardware threads per core), so on a 2-CPU machine it ran every ``parallel``
loop on one thread; ``TVM_NUM_THREADS`` is set to the most ``--threads`` before TVM starts its
pool and ``runtime.config_threadpool`` picks each row's count, threads left unpinned as
polyloop's OpenMP threads are.
"""
from __future__ import annotations

import argparse
import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import polyloop as pl
from polyloop.bench.peers import aligned_copy, load_tvm, time_call
from polyloop.bench.tvm_ref import tvm_target
from polyloop.runtime.module import apply_thread_count

LADDER = ("blocking", "vectorize", "loop permutation", "array packing", "write cache", "parallel")


# -- the schedules, once per tool --------------------------------------------------------------

def ladder_polyloop(step: int, n: int, bn: int = 32, kf: int = 4) -> pl.Schedule:
    """Step ``step`` (1..6) of the GEMM ladder in polyloop."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    if step >= 4:
        P = pl.compute((n // bn, n, bn), lambda x, y, z: B[y, x * bn + z], name="P")
        C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * P[j // bn, k, j % bn], axis=k),
                       name="C")
    else:
        C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    cc = sch.cache_write("C", "global") if step >= 5 else None
    i, j, kk = sch.get_loops("C")
    mo, mi = sch.split(i, [None, bn])
    no, ni = sch.split(j, [None, bn])
    ko, ki = sch.split(kk, [None, kf])
    sch.reorder(mo, no, ko, ki, mi, ni) if step <= 2 else sch.reorder(mo, no, ko, mi, ki, ni)
    if step >= 2:
        sch.vectorize(ni)
    if cc is not None:
        sch.unroll(ki)
        sch.reverse_compute_at(cc, no)
    if step >= 6:
        sch.parallel(mo)
    sch.decompose_reduction("C", ko)
    if step >= 4:
        x, _, z = sch.get_loops("P")
        sch.vectorize(z)
        sch.parallel(x)
    return sch


def ladder_tvm(tvm: Any, step: int, n: int, bn: int = 32, kf: int = 4) -> Any:
    """The same step in TVM (TensorIR schedule of the te program)."""
    from tvm import te
    import tvm.s_tir as s_tir
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    if step >= 4:
        P = te.compute((n // bn, n, bn), lambda x, y, z: B[y, x * bn + z], name="P")
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * P[j // bn, k, j % bn], axis=k),
                       name="C")
    else:
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = s_tir.Schedule(te.create_prim_func([A, B, C]))
    blk = sch.get_sblock("C")
    cc = sch.cache_write(blk, 0, "global") if step >= 5 else None
    i, j, kk = sch.get_loops(blk)
    mo, mi = sch.split(i, [None, bn])
    no, ni = sch.split(j, [None, bn])
    ko, ki = sch.split(kk, [None, kf])
    sch.reorder(mo, no, ko, ki, mi, ni) if step <= 2 else sch.reorder(mo, no, ko, mi, ki, ni)
    if step >= 2:
        sch.vectorize(ni)
    if cc is not None:
        sch.unroll(ki)
        sch.reverse_compute_at(cc, no)
    if step >= 6:
        sch.parallel(mo)
    sch.decompose_reduction(blk, ko)
    if step >= 4:
        x, _, z = sch.get_loops(sch.get_sblock("P"))
        sch.vectorize(z)
        sch.parallel(x)
    return sch.mod


def conv2d_polyloop(shape=(4, 8, 28, 28), co=32, ks=3) -> pl.Schedule:
    nb, ci, h, w = shape
    X = pl.placeholder(shape, "float32", name="X")
    W = pl.placeholder((co, ci, ks, ks), "float32", name="W")
    Xp = pl.compute((nb, ci, h + 2, w + 2), lambda b, c, y, x: pl.where(
        (y >= 1) & (y < h + 1) & (x >= 1) & (x < w + 1), X[b, c, y - 1, x - 1], 0.0), name="Xp")
    rc = pl.reduce_axis((0, ci), name="rc")
    ry = pl.reduce_axis((0, ks), name="ry")
    rx = pl.reduce_axis((0, ks), name="rx")
    Y = pl.compute((nb, co, h, w), lambda b, k, y, x: pl.sum(
        Xp[b, rc, y + ry, x + rx] * W[k, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    sch = pl.Schedule(Y)
    sch.compute_inline("Xp")
    b, k, y, x, c, r, s = sch.get_loops("Y")
    bk = sch.fuse(b, k)
    yx = sch.fuse(y, x)
    yx0, yx1 = sch.split(yx, [None, 16])
    sch.reorder(bk, yx0, c, r, s, yx1)
    sch.parallel(bk)
    sch.unroll(s)
    sch.vectorize(yx1)
    sch.decompose_reduction("Y", c)
    return sch


def conv2d_tvm(tvm: Any, shape=(4, 8, 28, 28), co=32, ks=3) -> Any:
    from tvm import te, tirx
    import tvm.s_tir as s_tir
    nb, ci, h, w = shape
    X = te.placeholder(shape, "float32", name="X")
    W = te.placeholder((co, ci, ks, ks), "float32", name="W")
    Xp = te.compute((nb, ci, h + 2, w + 2), lambda b, c, y, x: tirx.if_then_else(
        tirx.all(y >= 1, y < h + 1, x >= 1, x < w + 1), X[b, c, y - 1, x - 1],
        tirx.const(0.0, "float32")), name="Xp")
    rc = te.reduce_axis((0, ci), name="rc")
    ry = te.reduce_axis((0, ks), name="ry")
    rx = te.reduce_axis((0, ks), name="rx")
    Y = te.compute((nb, co, h, w), lambda b, k, y, x: te.sum(
        Xp[b, rc, y + ry, x + rx] * W[k, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    sch = s_tir.Schedule(te.create_prim_func([X, W, Y]))
    sch.compute_inline(sch.get_sblock("Xp"))
    blk = sch.get_sblock("Y")
    b, k, y, x, c, r, s = sch.get_loops(blk)
    bk = sch.fuse(b, k)
    yx = sch.fuse(y, x)
    yx0, yx1 = sch.split(yx, [None, 16])
    sch.reorder(bk, yx0, c, r, s, yx1)
    sch.parallel(bk)
    sch.unroll(s)
    sch.vectorize(yx1)
    sch.decompose_reduction(blk, c)
    return sch.mod


def bmm_relu_polyloop(b=16, n=128) -> pl.Schedule:
    A = pl.placeholder((b, n, n), "float32", name="A")
    B = pl.placeholder((b, n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((b, n, n), lambda t, i, j: pl.sum(A[t, i, k] * B[t, k, j], axis=k), name="Y")
    C = pl.compute((b, n, n), lambda t, i, j: pl.maximum(Y[t, i, j], 0.0), name="C")
    sch = pl.Schedule(C)
    t, i, j, kk = sch.get_loops("Y")
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(kk, [None, 4])
    sch.reorder(j0, k0, k1, j1)
    sch.reverse_compute_at("C", j0)
    sch.parallel(t)
    init = sch.decompose_reduction("Y", k0)
    sch.unroll(k1)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops("C")[-1])
    return sch


def bmm_relu_tvm(tvm: Any, b=16, n=128) -> Any:
    from tvm import te, tirx
    import tvm.s_tir as s_tir
    A = te.placeholder((b, n, n), "float32", name="A")
    B = te.placeholder((b, n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((b, n, n), lambda t, i, j: te.sum(A[t, i, k] * B[t, k, j], axis=k), name="Y")
    C = te.compute((b, n, n), lambda t, i, j: tirx.max(Y[t, i, j], tirx.const(0, "float32")),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([A, B, C]))
    blk = sch.get_sblock("Y")
    t, i, j, kk = sch.get_loops(blk)
    j0, j1 = sch.split(j, [None, 8])
    k0, k1 = sch.split(kk, [None, 4])
    sch.reorder(j0, k0, k1, j1)
    sch.reverse_compute_at(sch.get_sblock("C"), j0)
    sch.parallel(t)
    init = sch.decompose_reduction(blk, k0)
    sch.unroll(k1)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops(sch.get_sblock("C"))[-1])
    return sch.mod


def depthwise_polyloop(shape=(1, 256, 64, 64), ks=3) -> pl.Schedule:
    nb, ch, h, w = shape
    X = pl.placeholder(shape, "float32", name="X")
    W = pl.placeholder((ch, 1, ks, ks), "float32", name="W")
    Xp = pl.compute((nb, ch, h + 2, w + 2), lambda b, c, y, x: pl.where(
        (y >= 1) & (y < h + 1) & (x >= 1) & (x < w + 1), X[b, c, y - 1, x - 1], 0.0), name="Xp")
    ry = pl.reduce_axis((0, ks), name="ry")
    rx = pl.reduce_axis((0, ks), name="rx")
    Y = pl.compute(shape, lambda b, c, y, x: pl.sum(Xp[b, c, y + ry, x + rx] * W[c, 0, ry, rx],
                                                   axis=[ry, rx]), name="Y")
    sch = pl.Schedule(Y)
    sch.compute_inline("Xp")
    b, c, y, x, r, s = sch.get_loops("Y")
    bc = sch.fuse(b, c)
    x0, x1 = sch.split(x, [None, 16])
    sch.reorder(bc, y, x0, r, s, x1)
    sch.parallel(bc)
    sch.unroll(r)
    sch.unroll(s)
    sch.vectorize(x1)
    sch.decompose_reduction("Y", r)
    return sch


def depthwise_tvm(tvm: Any, shape=(1, 256, 64, 64), ks=3) -> Any:
    from tvm import te, tirx
    import tvm.s_tir as s_tir
    nb, ch, h, w = shape
    X = te.placeholder(shape, "float32", name="X")
    W = te.placeholder((ch, 1, ks, ks), "float32", name="W")
    Xp = te.compute((nb, ch, h + 2, w + 2), lambda b, c, y, x: tirx.if_then_else(
        tirx.all(y >= 1, y < h + 1, x >= 1, x < w + 1), X[b, c, y - 1, x - 1],
        tirx.const(0.0, "float32")), name="Xp")
    ry = te.reduce_axis((0, ks), name="ry")
    rx = te.reduce_axis((0, ks), name="rx")
    Y = te.compute(shape, lambda b, c, y, x: te.sum(Xp[b, c, y + ry, x + rx] * W[c, 0, ry, rx],
                                                   axis=[ry, rx]), name="Y")
    sch = s_tir.Schedule(te.create_prim_func([X, W, Y]))
    sch.compute_inline(sch.get_sblock("Xp"))
    blk = sch.get_sblock("Y")
    b, c, y, x, r, s = sch.get_loops(blk)
    bc = sch.fuse(b, c)
    x0, x1 = sch.split(x, [None, 16])
    sch.reorder(bc, y, x0, r, s, x1)
    sch.parallel(bc)
    sch.unroll(r)
    sch.unroll(s)
    sch.vectorize(x1)
    sch.decompose_reduction(blk, r)
    return sch.mod


def softmax_polyloop(rows=1024, cols=1024) -> pl.Schedule:
    X = pl.placeholder((rows, cols), "float32", name="X")
    k1 = pl.reduce_axis((0, cols), name="k")
    mx = pl.compute((rows,), lambda i: pl.max(X[i, k1], axis=k1), name="mx")
    e = pl.compute((rows, cols), lambda i, j: pl.exp(X[i, j] - mx[i]), name="e")
    k2 = pl.reduce_axis((0, cols), name="k")
    total = pl.compute((rows,), lambda i: pl.sum(e[i, k2], axis=k2), name="total")
    Y = pl.compute((rows, cols), lambda i, j: e[i, j] / total[i], name="Y")
    sch = pl.Schedule(Y)
    i, j = sch.get_loops("Y")
    sch.parallel(i)
    for stage in ("total", "e", "mx"):
        sch.compute_at(stage, i)
    for stage in ("e", "Y"):
        _, j0, j1 = _split_last(sch, stage)
        sch.vectorize(j1)
    return sch


def _split_last(sch: Any, stage: Any) -> tuple[Any, Any, Any]:
    loops = sch.get_loops(stage)
    j0, j1 = sch.split(loops[-1], [None, 16])
    return loops[0], j0, j1


def softmax_tvm(tvm: Any, rows=1024, cols=1024) -> Any:
    from tvm import te
    import tvm.s_tir as s_tir
    X = te.placeholder((rows, cols), "float32", name="X")
    k1 = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    e = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, cols), name="k")
    total = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="total")
    Y = te.compute((rows, cols), lambda i, j: e[i, j] / total[i], name="Y")
    sch = s_tir.Schedule(te.create_prim_func([X, Y]))
    i, j = sch.get_loops(sch.get_sblock("Y"))
    sch.parallel(i)
    for stage in ("total", "e", "mx"):
        sch.compute_at(sch.get_sblock(stage), i)
    for stage in ("e", "Y"):
        _, j0, j1 = _split_last(sch, sch.get_sblock(stage))
        sch.vectorize(j1)
    return sch.mod


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv_ref(x: np.ndarray, w: np.ndarray, *, depthwise: bool = False) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    nb, ch, h, wd = x.shape
    ks = w.shape[-1]
    out = np.zeros((nb, w.shape[0], h, wd))
    for r in range(ks):
        for s in range(ks):
            win = xp[:, :, r:r + h, s:s + wd]
            if depthwise:
                out += win * w[None, :, 0, r, s, None, None]
            else:
                out += np.einsum("bchw,kc->bkhw", win, w[:, :, r, s])
    return out.astype(np.float32)


# -- the cases -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Case:
    name: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    out_shape: tuple[int, ...]
    reference: Callable[..., np.ndarray]
    polyloop: Callable[[], Any]                 # a Schedule, or a HandC kernel written in C
    tvm: Callable[[Any], Any] | None            # tvm -> IRModule


def cases(n: int) -> dict[str, list[Case]]:
    mat = lambda r: [r.random((n, n), dtype=np.float32) for _ in range(2)]  # noqa: E731
    ladder = [Case(f"ladder {s}. {LADDER[s - 1]}", mat, (n, n), lambda a, b: a @ b,
                   lambda s=s: ladder_polyloop(s, n), lambda tvm, s=s: ladder_tvm(tvm, s, n))
              for s in range(1, 7)]
    ladder.append(Case("ladder: polyloop.ops.schedule_matmul", mat, (n, n), lambda a, b: a @ b,
                       lambda: _ops_matmul(n), None))
    ladder.append(Case("ladder 6 by hand in C (same schedule)", mat, (n, n), lambda a, b: a @ b,
                       lambda: HandC(ladder_by_hand(n), "ladder_by_hand"), None))
    bmm = lambda r: [r.random((16, 128, 128), dtype=np.float32) for _ in range(2)]  # noqa: E731
    return {
        "ladder": ladder,
        "conv2d": [Case("conv2d (MLC)", lambda r: [r.random((4, 8, 28, 28), dtype=np.float32),
                                                   r.random((32, 8, 3, 3), dtype=np.float32)],
                        (4, 32, 28, 28), _conv_ref, conv2d_polyloop, conv2d_tvm)],
        "bmm_relu": [Case("bmm_relu (MLC)", bmm, (16, 128, 128),
                          lambda a, b: np.maximum(a @ b, 0), bmm_relu_polyloop, bmm_relu_tvm)],
        "depthwise": [Case("depthwise 3x3", lambda r: [
            r.random((1, 256, 64, 64), dtype=np.float32),
            r.random((256, 1, 3, 3), dtype=np.float32)],
            (1, 256, 64, 64), lambda x, w: _conv_ref(x, w, depthwise=True),
            depthwise_polyloop, depthwise_tvm)],
        "softmax": [Case("softmax rows",
                         lambda r: [r.standard_normal((1024, 1024), dtype=np.float32)],
                         (1024, 1024), _softmax_ref, softmax_polyloop, softmax_tvm)],
    }


@dataclass(frozen=True, slots=True)
class HandC:
    """A kernel written by hand in C: ``symbol(inputs..., output)`` on float pointers."""
    source: str
    symbol: str


def ladder_by_hand(n: int, bn: int = 32, kf: int = 4) -> str:
    """The ladder's last step as an expert writes it in C, loop for loop the same schedule: B
    packed into ``bn``-wide panels (in parallel), a ``bn`` x ``bn`` tile of C in a local buffer
    per (mo, no), k split by ``kf`` and unrolled, the ``bn`` columns of one row of the tile held
    in vector registers over the ``kf`` steps (fused multiply-adds), the tile copied to C at the
    end. It answers whether the gap to ``ops.schedule_matmul`` is the code or the schedule."""
    if n % bn or n % kf or bn % 16:
        raise SystemExit(f"ladder_by_hand: n={n} must be a multiple of {bn} and {kf}")
    return f"""#include <stdlib.h>
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4)));
#define N {n}
#define BN {bn}
#define KF {kf}
int ladder_by_hand(const float *A, const float *B, float *C) {{
    float *P = aligned_alloc(64, sizeof(float) * N * N);
    if (!P) return 1;
    #pragma omp parallel for
    for (int x = 0; x < N / BN; x++)
        for (int y = 0; y < N; y++)
            for (int z = 0; z < BN; z += 16)
                *(v16 *)&P[((long)x * N + y) * BN + z] = *(const v16u *)&B[(long)y * N + x * BN + z];
    #pragma omp parallel for
    for (int mo = 0; mo < N / BN; mo++)
        for (int no = 0; no < N / BN; no++) {{
            _Alignas(64) float T[BN][BN] = {{{{0}}}};
            for (int ko = 0; ko < N / KF; ko++) {{
                const float *p = &P[((long)no * N + KF * ko) * BN];
                for (int mi = 0; mi < BN; mi++) {{
                    const float *a = &A[(long)(mo * BN + mi) * N + KF * ko];
                    v16 acc[BN / 16];
                    for (int v = 0; v < BN / 16; v++) acc[v] = *(v16 *)&T[mi][16 * v];
                    #pragma GCC unroll 16
                    for (int ki = 0; ki < KF; ki++)
                        for (int v = 0; v < BN / 16; v++)
                            acc[v] += a[ki] * *(const v16 *)&p[ki * BN + 16 * v];
                    for (int v = 0; v < BN / 16; v++) *(v16 *)&T[mi][16 * v] = acc[v];
                }}
            }}
            for (int i = 0; i < BN; i++)
                for (int j = 0; j < BN; j += 16)
                    *(v16u *)&C[(long)(mo * BN + i) * N + no * BN + j] = *(v16 *)&T[i][j];
        }}
    free(P);
    return 0;
}}
"""


def _hand_call(hand: HandC) -> tuple[ctypes.CDLL, Callable[..., None]]:
    from polyloop.runtime.compiler import compile_c
    lib = ctypes.CDLL(str(compile_c(hand.source, name=hand.symbol).path))
    fn = getattr(lib, hand.symbol)
    fn.restype = ctypes.c_int

    def call(*arrays: np.ndarray) -> None:
        if fn(*(ctypes.c_void_p(a.ctypes.data) for a in arrays)):
            raise SystemExit(f"{hand.symbol}: out of memory")
    return lib, call


def _ops_matmul(n: int) -> pl.Schedule:
    from polyloop.ops.matmul import matmul, schedule_matmul
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    return schedule_matmul(matmul(A, B))


# -- measuring -------------------------------------------------------------------------------

@dataclass(slots=True)
class Row:
    case: Case
    threads: int
    polyloop: Callable[[], float]
    tvm: Callable[[], float] | str
    best: dict[str, float] = field(default_factory=lambda: {"polyloop": math.inf, "tvm": math.inf})


def _check(name: str, tool: str, got: np.ndarray, want: np.ndarray) -> None:
    if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
        err = float(np.nanmax(np.abs(got - want)))
        raise SystemExit(f"schedule_parity: {tool} computes '{name}' wrongly "
                         f"(max abs error {err:.3e}); not timing it")


def thread_cpu_time(fn: Callable[[], object], *, repeat: int, min_time: float = 0.05) -> float:
    """Least CPU seconds of the calling thread per ``fn()``: with one thread both tools run the
    kernel in the caller, and the time spent waiting for a core on a loaded machine (which wall
    time counts) is left out."""
    fn()
    fn()
    number, start = 0, time.thread_time()
    while number == 0 or time.thread_time() - start < min_time:
        fn()
        number += 1
    best = math.inf
    for _ in range(repeat):
        start = time.thread_time()
        for _ in range(number):
            fn()
        best = min(best, (time.thread_time() - start) / number)
    return best


def _timer(clock: str) -> Callable[..., float]:
    if clock == "cpu":
        return thread_cpu_time
    return lambda fn, *, repeat: time_call(fn, repeat=repeat, stat="min")


# TVM's tensors start on 64-byte boundaries (kAllocAlignment); both tools read the same copies
aligned = aligned_copy


def _polyloop_timer(case: Case, arrays: list[np.ndarray], threads: int, repeat: int,
                    clock: str = "wall"):
    built = case.polyloop()
    if isinstance(built, HandC):
        lib, mod = _hand_call(built)
    else:
        mod = pl.build(built)
        lib = ctypes.CDLL(str(mod.library.path))
    arrays = [aligned(a) for a in arrays]
    out = aligned(np.full(case.out_shape, np.nan, np.float32))
    apply_thread_count(lib, threads)
    mod(*arrays, out)
    _check(case.name, "polyloop", out, case.reference(*arrays))

    def measure() -> float:
        apply_thread_count(lib, threads)
        return _timer(clock)(lambda: mod(*arrays, out), repeat=repeat)
    return measure


def _tvm_timer(tvm: Any, case: Case, arrays: list[np.ndarray], threads: int, repeat: int,
               clock: str = "wall"):
    lib = tvm.compile(case.tvm(tvm), target=tvm_target(threads))
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    out = tvm.runtime.tensor(np.full(case.out_shape, np.nan, np.float32), dev)
    lib(*args, out)
    _check(case.name, "TVM", out.numpy(), case.reference(*arrays))
    set_threads = tvm.get_global_func("runtime.config_threadpool")

    def measure() -> float:
        set_threads(1, threads)     # 1: TVM's default affinity mode; the count is what matters
        return _timer(clock)(lambda: lib(*args, out), repeat=repeat)
    return measure


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", nargs="*", default=["ladder", "conv2d", "bmm_relu", "depthwise",
                                                  "softmax"])
    p.add_argument("--n", type=int, default=1024, help="the ladder's matrix size")
    p.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: CPU time of the calling thread, for --threads 1 on a loaded machine")
    args = p.parse_args()
    if args.clock == "cpu" and args.threads != [1]:
        p.error("--clock cpu measures the calling thread only: use it with --threads 1")
    tvm = load_tvm(max(args.threads))
    every = cases(args.n)
    rows: list[Row] = []
    rng = np.random.default_rng(0)
    for name in args.cases:
        for case in every[name]:
            arrays = case.inputs(rng)
            for t in args.threads:
                timer = (_tvm_timer(tvm.module, case, arrays, t, args.repeat, args.clock)
                         if tvm.available and case.tvm is not None
                         else tvm.version if case.tvm is not None else "-")
                rows.append(Row(case, t, _polyloop_timer(case, arrays, t, args.repeat, args.clock),
                                timer))
    for _ in range(args.rounds):
        for row in rows:
            row.best["polyloop"] = min(row.best["polyloop"], row.polyloop())
            if callable(row.tvm):
                row.best["tvm"] = min(row.best["tvm"], row.tvm())
    print(f"TVM {tvm.version}; best of {args.rounds} rounds of the least of {args.repeat} "
          f"{args.clock} timings; ratio = TVM time / polyloop time (>= 1: polyloop at least as fast)")
    print(f"{'case':42} {'thr':>3} {'polyloop ms':>12} {'TVM ms':>10} {'ratio':>7}")
    for row in rows:
        pm = row.best["polyloop"] * 1e3
        if callable(row.tvm):
            tm = row.best["tvm"] * 1e3
            tail = f"{tm:10.3f} {tm / pm:6.2f}x"
        else:
            tail = f"{row.tvm:>10} {'':>7}"
        print(f"{row.case.name:42} {row.threads:>3} {pm:12.3f} {tail}")


if __name__ == "__main__":
    main()
