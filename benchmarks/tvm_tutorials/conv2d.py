# SPDX-License-Identifier: Apache-2.0
"""Convolutions as TVM users schedule them on a CPU:

- ``conv2d``: the MLC course's conv2d schedule (chapter 3's homework, see ``mlc_ch3``) on
  (4, 8, 28, 28) x (32, 8, 3, 3) with padding 1, the size ``benchmarks/schedule_parity.py``
  uses: padding inlined, n split [2, 2], f by 4, y and x by 2, the outer four fused and
  parallel, (n1, f1) fused and unrolled, (y1, x1) fused and vectorized;
- ``depthwise``: the depthwise convolution of TVM's stack slides (seed 003) and of its
  depthwise tutorial, (1, 256, 64, 64) by (256, 1, 3, 3), padding 1: ``IS =
  s.cache_read(PaddedInput, "shared", [DepthwiseConv2d])``, ``FS = s.cache_read(Filter,
  "shared", [DepthwiseConv2d])``, batch bound to ``blockIdx.y``, channels to ``blockIdx.x``.
  On a CPU: batch and channels fused and parallel, the two caches (scope "local": one per
  thread) computed at that loop, so each channel's padded 66 x 66 plane and its 3 x 3 filter
  are copied once per channel.

Where polyloop's spelling differs from the tutorial's, and why:
- ``s.cache_read(PaddedInput, "shared", [DepthwiseConv2d])`` is
  ``sch.cache_read("DepthwiseConv2d", "PaddedInput", "local")``: the reading block first,
  then the buffer; on a CPU "shared" (a GPU work-group's memory) has no meaning and the copy
  must be one per thread of the parallel loop, which scope "local" says;
- ``s[Output].bind(axis, te.thread_axis("blockIdx.x"))`` becomes ``parallel`` of the fused
  batch and channel loops (``sch.fuse``), the CPU's counterpart.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand
from .mlc_ch3 import conv2d_schedule, conv2d_tvm, conv_ref

TUTORIAL = "Convolutions (CPU)"


def depthwise_te(shape, ks: int = 3, pad: int = 1):
    nb, ch, h, w = shape
    X = pl.placeholder(shape, "float32", name="Input")
    F = pl.placeholder((ch, 1, ks, ks), "float32", name="Filter")
    P = pl.compute((nb, ch, h + 2 * pad, w + 2 * pad), lambda b, c, y, x: pl.where(
        (y >= pad) & (y < h + pad) & (x >= pad) & (x < w + pad),
        X[b, c, y - pad, x - pad], 0.0), name="PaddedInput")
    di = pl.reduce_axis((0, ks), name="di")
    dj = pl.reduce_axis((0, ks), name="dj")
    return pl.compute(shape, lambda b, c, i, j: pl.sum(
        P[b, c, i + di, j + dj] * F[c, 0, di, dj], axis=[di, dj]), name="DepthwiseConv2d")


def depthwise_polyloop(shape=(1, 256, 64, 64)) -> pl.Schedule:
    s = pl.Schedule(depthwise_te(shape))
    IS = s.cache_read("DepthwiseConv2d", "PaddedInput", "local")
    FS = s.cache_read("DepthwiseConv2d", "Filter", "local")
    b, c = s.get_loops("DepthwiseConv2d")[:2]
    bc = s.fuse(b, c)
    s.parallel(bc)
    s.compute_at(IS, bc)
    s.compute_at(FS, bc)
    return s


def depthwise_tvm(tvm: Any, shape=(1, 256, 64, 64), ks: int = 3, pad: int = 1) -> Any:
    from tvm import te, tirx
    nb, ch, h, w = shape
    X = te.placeholder(shape, name="Input")
    F = te.placeholder((ch, 1, ks, ks), name="Filter")
    P = te.compute((nb, ch, h + 2 * pad, w + 2 * pad), lambda b, c, y, x: tirx.if_then_else(
        tirx.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[b, c, y - pad, x - pad],
        tirx.const(0.0, "float32")), name="PaddedInput")
    di = te.reduce_axis((0, ks), name="di")
    dj = te.reduce_axis((0, ks), name="dj")
    D = te.compute(shape, lambda b, c, i, j: te.sum(
        P[b, c, i + di, j + dj] * F[c, 0, di, dj], axis=[di, dj]), name="DepthwiseConv2d")
    s = tvm.s_tir.Schedule(te.create_prim_func([X, F, D]))
    blk = s.get_sblock("DepthwiseConv2d")
    IS = s.cache_read(blk, 0, "local")
    FS = s.cache_read(blk, 1, "local")
    b, c = s.get_loops(blk)[:2]
    bc = s.fuse(b, c)
    s.parallel(bc)
    s.compute_at(IS, bc)
    s.compute_at(FS, bc)
    return s.mod


def _depthwise_ref(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    nb, ch, h, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros(x.shape)
    for di in range(3):
        for dj in range(3):
            out += xp[:, :, di:di + h, dj:dj + w] * f[None, :, 0, di, dj, None, None]
    return out


def ports(conv=((4, 8, 28, 28), 32), dw=(1, 256, 64, 64)) -> list[Port]:
    (shape, co) = conv
    nb, ci, h, w = shape
    return [
        Port(TUTORIAL, f"conv2d {nb}x{ci}x{h}x{w} by {co}x{ci}x3x3, pad 1 (MLC schedule)",
             "TensorIR", inputs_of(rand(*shape), rand(co, ci, 3, 3), rand(1, co, 1, 1)),
             (Out((nb, co, h, w)),), lambda x, w_, b: conv_ref(x, w_, b, 1),
             lambda: conv2d_schedule(shape, co, 3, 1), lambda tvm: conv2d_tvm(tvm, shape, co, 3, 1)),
        Port(TUTORIAL, f"depthwise {'x'.join(map(str, dw))}, 3x3, pad 1 (cache_read)", "TE",
             inputs_of(rand(*dw), rand(dw[1], 1, 3, 3)), (Out(dw),), _depthwise_ref,
             lambda: depthwise_polyloop(dw), lambda tvm: depthwise_tvm(tvm, dw)),
    ]


def small_ports() -> list[Port]:
    return ports(((4, 3, 7, 10), 12), (2, 5, 9, 11))
