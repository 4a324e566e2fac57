# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "How to optimize GEMM on CPU", every step, as the tutorial writes it.

C = A B with M = K = N = 1024 in float32, 32 x 32 tiles, the reduction split by 4. Steps:
default, blocking, vectorization, loop permutation, array packing, write cache, parallel. The
tutorial writes them with TE schedules (``s[C].tile``, ``s.cache_write(C, "global")``, then
``s[CC].compute_at(s[C], no)``); the last two steps are also given in the TensorIR spelling
(``cache_write`` then ``reverse_compute_at`` of the write-back into the tile, as MetaSchedule
and the MLC course write it).

Where polyloop's spelling differs from the tutorial's, and why:
- polyloop has no TE stage objects (``s[C]``): primitives take the block's name and loops, as
  TensorIR's do; ``s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)`` is
  ``sch.tile(*sch.get_loops("C")[:2], bn, bn)``, ``s[C].op.reduce_axis`` the last loop.
- ``cache_write`` follows TensorIR: it returns the block that writes the result back, and the
  block named "C" computes into the cache. So the tutorial's ``CC`` (the computing stage) is
  "C" and its ``C`` (the copy) is the returned block: ``s[CC].compute_at(s[C], no)`` is
  ``sch.compute_at("C", no)`` with ``no`` a loop of the write-back.
- ``packedB``'s shape is ``(N // bn, K, bn)`` (the tutorial's ``N / bn`` is a float in Python 3
  and TVM floors it).

TVM 0.27 runs no TE schedule: each step is written with the TensorIR primitives that make the
same loops (``tile`` is two splits and a reorder, ``compute_at`` of the computing block into
the write-back's tile); TE lowers the initialisation of a reduction computed at a tile as its
own loop nest, which TensorIR does with ``decompose_reduction`` at the reduction's outer loop
(after ``parallel``: TVM refuses to parallelize a loop above a decomposed reduction).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "How to optimize GEMM on CPU"
STEPS = ("default", "blocking", "vectorization", "loop permutation", "array packing",
         "write cache", "parallel")


def _gemm(m: int, n: int, k_: int, packed: bool, bn: int):
    A = pl.placeholder((m, k_), "float32", name="A")
    B = pl.placeholder((k_, n), "float32", name="B")
    k = pl.reduce_axis((0, k_), name="k")
    if not packed:
        return pl.compute((m, n), lambda x, y: pl.sum(A[x, k] * B[k, y], axis=k), name="C")
    packedB = pl.compute((n // bn, k_, bn), lambda bigN, kk, littleN: B[kk, bigN * bn + littleN],
                         name="packedB")
    return pl.compute((m, n), lambda x, y: pl.sum(A[x, k] * packedB[y // bn, k, y % bn], axis=k),
                      name="C")


def polyloop_step(step: int, m: int, n: int, k_: int, *, tensorir: bool = False, bn: int = 32,
                  kfactor: int = 4) -> pl.Schedule:
    """Step ``step`` (0: default .. 6: parallel) in polyloop, the tutorial's spelling (TE), or
    with ``tensorir`` the write cache placed by ``reverse_compute_at``."""
    C = _gemm(m, n, k_, step >= 4, bn)
    s = pl.Schedule(C)
    if step == 0:
        return s
    if step >= 5 and tensorir:
        CC = s.cache_write("C", "global")
        x, y, kaxis = s.get_loops("C")
        mo, no, mi, ni = s.tile(x, y, bn, bn)
        ko, ki = s.split(kaxis, factor=kfactor)
        s.reorder(ko, mi, ki, ni)
        s.vectorize(ni)
        s.unroll(ki)
        s.reverse_compute_at(CC, no)
        s.decompose_reduction("C", ko)
        if step == 6:
            s.parallel(mo)
    elif step >= 5:
        C_wb = s.cache_write("C", "global")          # the tutorial's C; "C" is its CC
        mo, no, mi, ni = s.tile(*s.get_loops(C_wb), bn, bn)
        s.compute_at("C", no)
        mc, nc, kaxis = s.get_loops("C")[-3:]
        ko, ki = s.split(kaxis, factor=kfactor)
        s.reorder(ko, mc, ki, nc)
        s.vectorize(nc)
        s.unroll(ki)
        if step == 6:
            s.parallel(mo)
    else:
        x, y, kaxis = s.get_loops("C")
        mo, no, mi, ni = s.tile(x, y, bn, bn)
        ko, ki = s.split(kaxis, factor=kfactor)
        if step == 1 or step == 2:
            s.reorder(mo, no, ko, ki, mi, ni)
        else:
            s.reorder(mo, no, ko, mi, ki, ni)
        if step >= 2:
            s.vectorize(ni)
    if step >= 4:
        bigN, _, littleN = s.get_loops("packedB")
        s.vectorize(littleN)
        s.parallel(bigN)
    return s


def tvm_step(tvm: Any, step: int, m: int, n: int, k_: int, *, tensorir: bool = False,
             bn: int = 32, kfactor: int = 4) -> Any:
    """The same step in TVM 0.27 (TensorIR primitives for the tutorial's TE schedule)."""
    from tvm import te
    import tvm.s_tir as s_tir
    A = te.placeholder((m, k_), name="A")
    B = te.placeholder((k_, n), name="B")
    k = te.reduce_axis((0, k_), "k")
    if step >= 4:
        packedB = te.compute((n // bn, k_, bn),
                             lambda bigN, kk, littleN: B[kk, bigN * bn + littleN], name="packedB")
        C = te.compute((m, n), lambda x, y: te.sum(
            A[x, k] * packedB[y // bn, k, tvm.tirx.indexmod(y, bn)], axis=k), name="C")
    else:
        C = te.compute((m, n), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = s_tir.Schedule(te.create_prim_func([A, B, C]))
    if step == 0:
        return s.mod
    blk = s.get_sblock("C")

    def tile(x, y):
        mo, mi = s.split(x, [None, bn])
        no, ni = s.split(y, [None, bn])
        s.reorder(mo, no, mi, ni)
        return mo, no, mi, ni
    if step >= 5 and tensorir:
        CC = s.cache_write(blk, 0, "global")
        x, y, kaxis = s.get_loops(blk)
        mo, no, mi, ni = tile(x, y)
        ko, ki = s.split(kaxis, [None, kfactor])
        s.reorder(ko, mi, ki, ni)
        s.vectorize(ni)
        s.unroll(ki)
        s.reverse_compute_at(CC, no)
        if step == 6:
            s.parallel(mo)
        s.decompose_reduction(blk, ko)
    elif step >= 5:
        wb = s.cache_write(blk, 0, "global")
        mo, no, _, _ = tile(*s.get_loops(wb))
        s.compute_at(blk, no)
        mc, nc, kaxis = s.get_loops(blk)[-3:]
        ko, ki = s.split(kaxis, [None, kfactor])
        s.reorder(ko, mc, ki, nc)
        s.vectorize(nc)
        s.unroll(ki)
        if step == 6:
            s.parallel(mo)
        s.decompose_reduction(blk, ko)
    else:
        x, y, kaxis = s.get_loops(blk)
        mo, no, mi, ni = tile(x, y)
        ko, ki = s.split(kaxis, [None, kfactor])
        s.reorder(mo, no, ko, ki, mi, ni) if step <= 2 else s.reorder(mo, no, ko, mi, ki, ni)
        if step >= 2:
            s.vectorize(ni)
    if step >= 4:
        bigN, _, littleN = s.get_loops(s.get_sblock("packedB"))
        s.vectorize(littleN)
        s.parallel(bigN)
    return s.mod


def ports(m: int = 1024, n: int = 1024, k: int = 1024) -> list[Port]:
    """Every step; ``n`` must be a multiple of 32 (the packed panels)."""
    ins = inputs_of(rand(m, k), rand(k, n))
    out = (Out((m, n)),)
    ref = lambda a, b: a.astype(np.float64) @ b  # noqa: E731
    result = []
    for step, name in enumerate(STEPS):
        spellings = ("TE", "TensorIR") if step >= 5 else ("",)
        for sp in spellings:
            tir = sp == "TensorIR"
            result.append(Port(
                TUTORIAL, f"{step}. {name}", sp, ins, out, ref,
                lambda step=step, tir=tir: polyloop_step(step, m, n, k, tensorir=tir),
                lambda tvm, step=step, tir=tir: tvm_step(tvm, step, m, n, k, tensorir=tir),
                rtol=1e-3, atol=1e-3))
    return result


def small_ports() -> list[Port]:
    return ports(70, 64, 45)
