# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "Reduction", as it writes it: a row sum ``B[i] = sum_k A[i, k]`` over an
``n x m`` matrix of symbolic sizes, split, rfactor and its cross-thread form; a convolution
written as a 2-D reduction; a reduction defined with ``comm_reducer`` (a product).

Steps (sizes: ``n = 4096, m = 1024``; the convolution on ``1026 x 1026``):
- ``default``: the row sum as written;
- ``split``: ``ko, ki = split(k, 16)``, ``xo, xi = split(i, 32)``;
- ``rfactor``: ``BF = rfactor(B, ki)``: 16 partial sums per row, then their sum;
- ``rfactor, per row``: the tutorial's cross-thread reduction on a CPU. The tutorial binds
  ``xo`` to ``blockIdx.x``, ``xi`` to ``threadIdx.y``, B's reduction loop to ``threadIdx.x``
  and computes ``BF`` at that loop. On a CPU: ``xo`` parallel, ``BF`` computed at ``xi``, its
  16 partial sums (the ``threadIdx.x`` lanes) one vector;
- ``conv as 2-D reduction`` and ``comm_reducer (product)``: the default schedules.

Where polyloop's spelling differs from the tutorial's, and why:
- ``s.rfactor(B, ki)`` is ``sch.rfactor(ki)`` (the loop names its block), and it returns the
  partial-sum block "B_rf" (TVM's TE names it "B.rf");
- ``compute_at`` makes a block's loops again over its iterators, as TVM's does; polyloop's
  rfactor block iterates over the original ``k`` (its partial sum is ``BF[k % 16, i]``), where
  TVM's has two iterators (``ki``, ``ko``): so polyloop splits ``k`` by 16 again after
  ``compute_at`` (TVM reorders its two loops instead) and vectorizes the inner part;
- ``te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t))`` is
  ``pl.comm_reducer(lambda x, y: x * y, lambda t: pl.const(1, t))``.
TVM 0.27 runs the same primitives through TensorIR (``rfactor(loop, factor_axis=0)``). Its
"rfactor, per row" is wrong when ``m`` is not a multiple of 16: the partial-sum block loses the
bound of the split reduction and reads past the end of each row (seen at m = 45: the sums are
off by the next row's first elements). The benchmark's ``m`` is a multiple of 16; the small
sizes show it ("TVM wrong" in the table).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "Reduction"


def _rowsum():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    return pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="B")


def rowsum_polyloop(step: str) -> pl.Schedule:
    s = pl.Schedule(_rowsum())
    if step == "default":
        return s
    i, k = s.get_loops("B")
    ko, ki = s.split(k, factor=16)
    if step == "split":
        s.split(i, factor=32)
        return s
    BF = s.rfactor(ki)
    if step == "rfactor":
        return s
    # the cross-thread reduction on a CPU (see the module docstring)
    i, kr = s.get_loops("B")
    xo, xi = s.split(i, factor=32)
    s.parallel(xo)
    s.compute_at(BF, xi)
    kko, r = s.split(s.get_loops(BF)[-1], factor=16)    # BF's loop over k, split again
    s.vectorize(r)
    return s


def rowsum_tvm(tvm: Any, step: str) -> Any:
    from tvm import te
    import tvm.s_tir as s_tir
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = s_tir.Schedule(te.create_prim_func([A, B]))
    if step == "default":
        return s.mod
    blk = s.get_sblock("B")
    i, k = s.get_loops(blk)
    ko, ki = s.split(k, [None, 16])
    if step == "split":
        s.split(i, [None, 32])
        return s.mod
    BF = s.rfactor(ki, 0)
    if step == "rfactor":
        return s.mod
    i, kr = s.get_loops(blk)
    xo, xi = s.split(i, [None, 32])
    s.parallel(xo)
    s.compute_at(BF, xi)
    r, kko = s.get_loops(BF)[-2:]
    s.reorder(kko, r)
    s.vectorize(r)
    return s.mod


def conv2d_polyloop() -> pl.Tensor:
    n = pl.var("n")
    Input = pl.placeholder((n, n), "float32", name="Input")
    Filter = pl.placeholder((3, 3), "float32", name="Filter")
    di = pl.reduce_axis((0, 3), name="di")
    dj = pl.reduce_axis((0, 3), name="dj")
    return pl.compute((n - 2, n - 2), lambda i, j: pl.sum(
        Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]), name="Output")


def conv2d_tvm(tvm: Any) -> Any:
    from tvm import te
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute((n - 2, n - 2), lambda i, j: te.sum(
        Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]), name="Output")
    return tvm.IRModule({"main": te.create_prim_func([Input, Filter, Output])})


def product_polyloop() -> pl.Tensor:
    n, m = pl.var("n"), pl.var("m")
    product = pl.comm_reducer(lambda x, y: x * y, lambda t: pl.const(1, t), name="product")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    return pl.compute((n,), lambda i: product(A[i, k], axis=k), name="B")


def product_tvm(tvm: Any) -> Any:
    from tvm import te
    n, m = te.var("n"), te.var("m")
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tirx.const(1, dtype=t),
                              name="product")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


def _near_one(n: int, m: int):
    # a product of m values stays finite near 1
    return lambda rng: (1.0 + (rng.random((n, m)) - 0.5) * 0.01).astype(np.float32)


def _conv_ref(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    n = x.shape[0]
    out = np.zeros((n - 2, n - 2))
    for di in range(3):
        for dj in range(3):
            out += x[di:di + n - 2, dj:dj + n - 2].astype(np.float64) * f[di, dj]
    return out


def ports(n: int = 4096, m: int = 1024, conv: int = 1026) -> list[Port]:
    rows = inputs_of(rand(n, m))
    out = (Out((n,)),)
    ref = lambda a: a.astype(np.float64).sum(axis=1)  # noqa: E731
    result = [Port(TUTORIAL, f"row sum: {step}", "", rows, out, ref,
                   lambda step=step: rowsum_polyloop(step),
                   lambda tvm, step=step: rowsum_tvm(tvm, step), rtol=1e-4, atol=1e-3)
              for step in ("default", "split", "rfactor", "rfactor, per row")]
    result.append(Port(TUTORIAL, "conv as 2-D reduction", "", inputs_of(rand(conv, conv),
                                                                        rand(3, 3)),
                       (Out((conv - 2, conv - 2)),), _conv_ref, conv2d_polyloop, conv2d_tvm))
    result.append(Port(TUTORIAL, "comm_reducer (product)", "", inputs_of(_near_one(n, m)), out,
                       lambda a: np.prod(a.astype(np.float64), axis=1), product_polyloop,
                       product_tvm, rtol=1e-3, atol=1e-3))
    return result


def small_ports() -> list[Port]:
    return ports(77, 45, 13)
