# SPDX-License-Identifier: Apache-2.0
"""The MLC course, chapter 3 (IRModule) and its first homework: the convolution of the small
CNN, ``conv2d_1 = topi.nn.conv2d(x, w, 1, 0, 1) + bias`` on (4, 1, 28, 28) x (32, 1, 3, 3),
scheduled as the homework does:

    pad_temp inlined; n split [2, 2], f by 4, y by 2, x by 2; reorder (outer four, rc, ry, rx,
    inner four); the outer four fused and parallel; (n1, f1) fused and unrolled; (y1, x1)
    fused and vectorized; decompose_reduction at rc.

The same schedule at the size ``benchmarks/schedule_parity.py`` uses for the course's conv2d,
(4, 8, 28, 28) x (32, 8, 3, 3) with padding 1, is in ``conv2d.py``.

Where polyloop's spelling differs from the course's, and why:
- the convolution is written with ``pl.compute`` the way ``topi.nn.conv2d`` builds it (a
  ``pad_temp`` stage, then ``conv2d_nchw``, then the bias ``T_add``), since polyloop has no
  topi; blocks are named as topi names them, so the schedule reads the same;
- ``sch.get_block("pad_temp", "conv2d_1")`` takes no function name: a polyloop schedule is one
  function.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "MLC course ch. 3: conv2d homework"


def conv_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    nb, _, hp, wp = xp.shape
    ks = w.shape[-1]
    oh, ow = hp - ks + 1, wp - ks + 1
    out = np.zeros((nb, w.shape[0], oh, ow))
    for r in range(ks):
        for s in range(ks):
            out += np.einsum("bchw,kc->bkhw", xp[:, :, r:r + oh, s:s + ow], w[:, :, r, s])
    return out + b


def conv2d_te(x_shape, co: int, ks: int, pad: int):
    """pad_temp, conv2d_nchw and T_add as ``topi.nn.conv2d`` + ``topi.add`` make them."""
    nb, ci, h, w = x_shape
    X = pl.placeholder(x_shape, "float32", name="X")
    W = pl.placeholder((co, ci, ks, ks), "float32", name="W")
    bias = pl.placeholder((1, co, 1, 1), "float32", name="b")
    hp, wp = h + 2 * pad, w + 2 * pad
    if pad:
        P = pl.compute((nb, ci, hp, wp), lambda i0, i1, i2, i3: pl.where(
            (i2 >= pad) & (i2 < h + pad) & (i3 >= pad) & (i3 < w + pad),
            X[i0, i1, i2 - pad, i3 - pad], 0.0), name="pad_temp")
    else:
        P = pl.compute((nb, ci, h, w), lambda i0, i1, i2, i3: X[i0, i1, i2, i3], name="pad_temp")
    rc = pl.reduce_axis((0, ci), name="rc")
    ry = pl.reduce_axis((0, ks), name="ry")
    rx = pl.reduce_axis((0, ks), name="rx")
    oh, ow = hp - ks + 1, wp - ks + 1
    conv = pl.compute((nb, co, oh, ow), lambda nn, ff, yy, xx: pl.sum(
        P[nn, rc, yy + ry, xx + rx] * W[ff, rc, ry, rx], axis=[rc, ry, rx]), name="conv2d_nchw")
    return pl.compute((nb, co, oh, ow), lambda a0, a1, a2, a3: conv[a0, a1, a2, a3]
                      + bias[0, a1, 0, 0], name="T_add")


def conv2d_schedule(x_shape=(4, 1, 28, 28), co=32, ks=3, pad=0) -> pl.Schedule:
    sch = pl.Schedule(conv2d_te(x_shape, co, ks, pad))
    pad_temp = sch.get_block("pad_temp")
    sch.compute_inline(pad_temp)
    conv = sch.get_block("conv2d_nchw")
    i0, i1, i2, i3, i4, i5, i6 = sch.get_loops(conv)
    i0_0, i0_1 = sch.split(i0, factors=[2, 2])
    i1_0, i1_1 = sch.split(i1, factors=[None, 4])
    i2_0, i2_1 = sch.split(i2, factors=[None, 2])
    i3_0, i3_1 = sch.split(i3, factors=[None, 2])
    sch.reorder(i0_0, i1_0, i2_0, i3_0, i4, i5, i6, i0_1, i1_1, i2_1, i3_1)
    outer = sch.fuse(i0_0, i1_0, i2_0, i3_0)
    sch.parallel(outer)
    unrolled = sch.fuse(i0_1, i1_1)
    vector = sch.fuse(i2_1, i3_1)
    sch.unroll(unrolled)
    sch.vectorize(vector)
    sch.decompose_reduction(conv, i4)
    return sch


def conv2d_tvm(tvm: Any, x_shape=(4, 1, 28, 28), co=32, ks=3, pad=0) -> Any:
    from tvm import te, topi
    import tvm.s_tir as s_tir
    X = te.placeholder(x_shape, "float32", name="X")
    W = te.placeholder((co, x_shape[1], ks, ks), "float32", name="W")
    b = te.placeholder((1, co, 1, 1), "float32", name="b")
    out = topi.add(topi.nn.conv2d(X, W, 1, pad, 1), b)
    sch = s_tir.Schedule(te.create_prim_func([X, W, b, out]))
    sch.compute_inline(sch.get_sblock("pad_temp"))
    conv = sch.get_sblock("conv2d_nchw")
    i0, i1, i2, i3, i4, i5, i6 = sch.get_loops(conv)
    i0_0, i0_1 = sch.split(i0, factors=[2, 2])
    i1_0, i1_1 = sch.split(i1, factors=[None, 4])
    i2_0, i2_1 = sch.split(i2, factors=[None, 2])
    i3_0, i3_1 = sch.split(i3, factors=[None, 2])
    sch.reorder(i0_0, i1_0, i2_0, i3_0, i4, i5, i6, i0_1, i1_1, i2_1, i3_1)
    sch.parallel(sch.fuse(i0_0, i1_0, i2_0, i3_0))
    sch.unroll(sch.fuse(i0_1, i1_1))
    sch.vectorize(sch.fuse(i2_1, i3_1))
    sch.decompose_reduction(conv, i4)
    return sch.mod


def _port(step: str, x_shape, co, ks, pad) -> Port:
    nb, ci, h, w = x_shape
    oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
    return Port(TUTORIAL, step, "TensorIR",
                inputs_of(rand(*x_shape), rand(co, ci, ks, ks), rand(1, co, 1, 1)),
                (Out((nb, co, oh, ow)),), lambda x, w_, b: conv_ref(x, w_, b, pad),
                lambda: conv2d_schedule(x_shape, co, ks, pad),
                lambda tvm: conv2d_tvm(tvm, x_shape, co, ks, pad))


def ports() -> list[Port]:
    return [_port("conv2d_1 (4x1x28x28, 32 3x3)", (4, 1, 28, 28), 32, 3, 0)]


def small_ports() -> list[Port]:
    return [_port("conv2d_1 small", (4, 1, 11, 9), 8, 3, 0)]
