# SPDX-License-Identifier: Apache-2.0
"""The MLC course, chapter 2 (TensorIR), as it writes it:

- ``mm_relu`` (128 x 128 x 128, float32): the chapter's transformation, step by step: the
  original function; ``j`` split by 4 and ``reorder(j0, k, j1)``; ``reverse_compute_at`` of
  the ReLU at ``j0``; ``decompose_reduction`` of ``Y`` at ``k``;
- the exercises: broadcast add (4 x 4 + 4, int64) and the 2-D convolution (1 x 1 x 8 x 8 by
  2 x 1 x 3 x 3, int64) in their default form;
- ``bmm_relu`` (16 x 128 x 128 x 128): the exercise's schedule (j split by 8, reorder, n
  parallel, ReLU at j0, decompose_reduction, the init and ReLU rows vectorized, k split by 4
  and unrolled).

Where polyloop's spelling differs from the course's, and why:
- the course writes TVMScript (``@T.prim_func`` with blocks and ``T.axis.remap``); polyloop
  writes the same computations with ``pl.compute`` (the course's other way, tensor
  expressions): ``Y`` the product, ``C`` the ReLU, so ``sch.get_block("Y")`` names the same
  block. The course's ``get_block("Y", func_name="mm_relu")`` takes no function name in
  polyloop (a schedule is one function);
- ``decompose_reduction`` names the init block ``Y_init`` in both; polyloop's
  ``sch.decompose_reduction`` returns it, so the course's ``get_block("Y_init")`` is that
  handle;
- the loops of a block moved into another block's loops (``Y_init`` and ``C`` here) are
  polyloop's loops over the block's own iterators, the ones fixed by the loops around them
  included (``get_loops`` lists them; ``print(sch)`` shows their value): the course's
  ``get_loops(...)[3]`` (TVM makes new loops for the free ones only) is ``[-1]``.
TVM 0.27 runs the same primitives on the same computations written with ``te.compute``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "MLC course ch. 2: TensorIR"
MM_STEPS = ("original", "split j, reorder", "reverse_compute_at", "decompose_reduction")


def mm_relu_polyloop(step: int, n: int = 128) -> pl.Schedule:
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = pl.compute((n, n), lambda i, j: pl.maximum(Y[i, j], 0.0), name="C")
    sch = pl.Schedule(C)
    if step == 0:
        return sch
    block_Y = sch.get_block("Y")
    i, j, kk = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, kk, j1)
    if step >= 2:
        sch.reverse_compute_at(sch.get_block("C"), j0)
    if step >= 3:
        sch.decompose_reduction(block_Y, kk)
    return sch


def mm_relu_tvm(tvm: Any, step: int, n: int = 128) -> Any:
    from tvm import te, tirx
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((n, n), lambda i, j: tirx.max(Y[i, j], tirx.const(0, "float32")), name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
    if step == 0:
        return sch.mod
    block_Y = sch.get_sblock("Y")
    i, j, kk = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, kk, j1)
    if step >= 2:
        sch.reverse_compute_at(sch.get_sblock("C"), j0)
    if step >= 3:
        sch.decompose_reduction(block_Y, kk)
    return sch.mod


def add_polyloop() -> Any:
    A = pl.placeholder((4, 4), "int64", name="A")
    B = pl.placeholder((4,), "int64", name="B")
    return pl.compute((4, 4), lambda i, j: A[i, j] + B[j], name="C")


def add_tvm(tvm: Any) -> Any:
    from tvm import te
    A = te.placeholder((4, 4), "int64", name="A")
    B = te.placeholder((4,), "int64", name="B")
    C = te.compute((4, 4), lambda i, j: A[i, j] + B[j], name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def conv_polyloop(n=1, ci=1, h=8, w=8, co=2, ks=3) -> Any:
    A = pl.placeholder((n, ci, h, w), "int64", name="A")
    B = pl.placeholder((co, ci, ks, ks), "int64", name="B")
    m = pl.reduce_axis((0, ks), name="m")
    q = pl.reduce_axis((0, ks), name="q")
    # the course indexes A[vi, vi, ...] and B[vj, vi, ...] (its n = ci = 1)
    return pl.compute((n, co, h - ks + 1, w - ks + 1), lambda i, j, k, l_: pl.sum(
        A[i, i, k + m, l_ + q] * B[j, i, m, q], axis=[m, q]), name="C")


def conv_tvm(tvm: Any, n=1, ci=1, h=8, w=8, co=2, ks=3) -> Any:
    from tvm import te
    A = te.placeholder((n, ci, h, w), "int64", name="A")
    B = te.placeholder((co, ci, ks, ks), "int64", name="B")
    m = te.reduce_axis((0, ks), name="m")
    q = te.reduce_axis((0, ks), name="q")
    C = te.compute((n, co, h - ks + 1, w - ks + 1), lambda i, j, k, l_: te.sum(
        A[i, i, k + m, l_ + q] * B[j, i, m, q], axis=[m, q]), name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def bmm_relu_polyloop(b: int = 16, n: int = 128) -> pl.Schedule:
    A = pl.placeholder((b, n, n), "float32", name="A")
    B = pl.placeholder((b, n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((b, n, n), lambda t, i, j: pl.sum(A[t, i, k] * B[t, k, j], axis=k), name="Y")
    sch = pl.Schedule(pl.compute((b, n, n), lambda t, i, j: pl.maximum(Y[t, i, j], 0.0),
                                 name="C"))
    block_Y = sch.get_block("Y")
    nn, i, j, kk = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(nn, i, j0, kk, j1)
    sch.parallel(nn)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    y_init = sch.decompose_reduction(block_Y, kk)
    sch.vectorize(sch.get_loops(y_init)[-1])
    sch.vectorize(sch.get_loops(sch.get_block("C"))[-1])
    k0, k1 = sch.split(kk, factors=[None, 4])
    sch.unroll(k1)
    return sch


def bmm_relu_tvm(tvm: Any, b: int = 16, n: int = 128) -> Any:
    from tvm import te, tirx
    A = te.placeholder((b, n, n), name="A")
    B = te.placeholder((b, n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    Y = te.compute((b, n, n), lambda t, i, j: te.sum(A[t, i, k] * B[t, k, j], axis=k), name="Y")
    C = te.compute((b, n, n), lambda t, i, j: tirx.max(Y[t, i, j], tirx.const(0, "float32")),
                   name="C")
    sch = tvm.s_tir.Schedule(te.create_prim_func([A, B, C]))
    block_Y = sch.get_sblock("Y")
    nn, i, j, kk = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(nn, i, j0, kk, j1)
    sch.parallel(nn)
    sch.reverse_compute_at(sch.get_sblock("C"), j0)
    y_init = sch.decompose_reduction(block_Y, kk)
    sch.vectorize(sch.get_loops(y_init)[3])
    sch.vectorize(sch.get_loops(sch.get_sblock("C"))[3])
    k0, k1 = sch.split(kk, factors=[None, 4])
    sch.unroll(k1)
    return sch.mod


def _conv_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, _, h, w = a.shape
    co, _, ks, _ = b.shape
    out = np.zeros((n, co, h - ks + 1, w - ks + 1), np.int64)
    for m in range(ks):
        for q in range(ks):
            for i in range(n):
                out[i] += a[i, i, m:m + h - ks + 1, q:q + w - ks + 1][None] * \
                    b[:, i, m, q][:, None, None]
    return out


def ports(n: int = 128, batch: int = 16) -> list[Port]:
    mats = inputs_of(rand(n, n), rand(n, n))
    ref = lambda a, b: np.maximum(a.astype(np.float64) @ b, 0)  # noqa: E731
    out = [Port(TUTORIAL, f"mm_relu: {name}", "TensorIR", mats, (Out((n, n)),), ref,
                lambda s=s: mm_relu_polyloop(s, n), lambda tvm, s=s: mm_relu_tvm(tvm, s, n),
                rtol=1e-4, atol=1e-4) for s, name in enumerate(MM_STEPS)]
    out.append(Port(TUTORIAL, "broadcast add (4 x 4, int64)", "", inputs_of(
        rand(4, 4, dtype="int64"), rand(4, dtype="int64")), (Out((4, 4), "int64"),),
        lambda a, b: a + b, add_polyloop, add_tvm))
    out.append(Port(TUTORIAL, "conv (1x1x8x8 by 2x1x3x3, int64)", "", inputs_of(
        rand(1, 1, 8, 8, dtype="int64"), rand(2, 1, 3, 3, dtype="int64")),
        (Out((1, 2, 6, 6), "int64"),), _conv_ref, conv_polyloop, conv_tvm))
    bmm = inputs_of(rand(batch, n, n), rand(batch, n, n))
    out.append(Port(TUTORIAL, f"bmm_relu ({batch} x {n}^3)", "TensorIR", bmm,
                    (Out((batch, n, n)),), lambda a, b: np.maximum(a.astype(np.float64) @ b, 0),
                    lambda: bmm_relu_polyloop(batch, n), lambda tvm: bmm_relu_tvm(tvm, batch, n),
                    rtol=1e-4, atol=1e-4))
    return out


def small_ports() -> list[Port]:
    return ports(40, 3)
