# SPDX-License-Identifier: Apache-2.0
"""Apache TVM 0.27 references: matmul with the tiled schedule of TVM's CPU matmul tutorial
(B packed in 32-wide panels, 32 x 32 tiles (or the nearest that divides the size), k split by 4 and unrolled, a write cache per tile,
outer loop parallel, inner loop vectorized) and depthwise convolution with no schedule (TVM's
default lowering of the te expression), as TVM's reference figures were measured.

TVM 0.27 spellings: targets are dicts, ``tvm.compile``, ``tvm.s_tir``
schedules with ``get_sblock``, ``tvm.runtime.tensor``, ``tvm.tirx`` expressions.

Each builder returns ``(call, output)``: ``call()`` runs the compiled function on the converted
inputs and ``output()`` reads the result back as a NumPy array (for the check).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..util.isa import host_isa
from .. import config

Runner = tuple[Callable[[], object], Callable[[], np.ndarray]]


def tvm_target(threads: int) -> dict[str, object]:
    """The TVM 0.27 target for this host's CPU and ``threads`` cores. The string form and
    mcpu=native do not work in 0.27: it names a CPU with the host's vectors.

    >>> tvm_target(2)["num-cores"]
    2
    """
    isa = host_isa(config.CONFIG.cc)
    mcpu = {"avx512": "icelake-server", "avx2": "haswell"}.get(isa.name, "x86-64")
    return {"kind": "llvm", "mcpu": mcpu, "num-cores": threads}


def _run(tvm: Any, lib: Any, arrays: list[np.ndarray], out_shape: tuple[int, ...]) -> Runner:
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in arrays]
    out = tvm.runtime.tensor(np.zeros(out_shape, np.float32), dev)
    return (lambda: lib(*args, out)), out.numpy


def _tile(extent: int, preferred: int = 32) -> int:
    """``preferred`` if it divides ``extent``, else the divisor of ``extent`` in [8, 64]
    nearest to it, multiples of 8 first (tiles that do not divide make TVM guard every iteration); ``preferred``
    when there is none (the last tile is then partial)."""
    if extent % preferred == 0:
        return preferred
    divisors = [d for d in range(8, 65) if extent % d == 0]
    # whole vectors first (1000: 40, not 25)
    return (min(divisors, key=lambda d: (d % 8 != 0, abs(d - preferred))) if divisors
            else preferred)


def matmul(tvm: Any, a: np.ndarray, b: np.ndarray, *, threads: int) -> Runner:
    """The tutorial schedule of ``a @ b``: 32 x 32 tiles, or the nearest tile that divides a
    size (1000: 40); B's last panel is zero-padded when none does."""
    from tvm import te, tirx
    import tvm.s_tir as s_tir

    (m, kk), n = a.shape, b.shape[1]
    bm, bn = _tile(m), _tile(n)
    A = te.placeholder((m, kk), "float32", name="A")
    B = te.placeholder((kk, n), "float32", name="B")
    k = te.reduce_axis((0, kk), name="k")
    P = te.compute(((n + bn - 1) // bn, kk, bn),
                   lambda x, y, z: tirx.if_then_else(x * bn + z < n, B[y, tirx.min(x * bn + z, n - 1)],
                                                     tirx.const(0.0, "float32")), name="P")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, k] * P[j // bn, k, j % bn], axis=k),
                   name="C")
    sch = s_tir.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_sblock("C")
    write = sch.cache_write(block, 0, "global")
    i, j, r = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, bm])
    j0, j1 = sch.split(j, [None, bn])
    k0, k1 = sch.split(r, [None, 4])
    sch.reorder(i0, j0, k0, i1, k1, j1)
    sch.reverse_compute_at(write, j0)
    sch.parallel(i0)
    sch.unroll(k1)
    sch.vectorize(j1)
    sch.decompose_reduction(block, k0)
    x, _, z = sch.get_loops(sch.get_sblock("P"))
    sch.parallel(x)
    sch.vectorize(z)
    lib = tvm.compile(sch.mod, target=tvm_target(threads))
    return _run(tvm, lib, [a, b], (m, n))


def depthwise(tvm: Any, x: np.ndarray, w: np.ndarray, *, threads: int, pad: int = 1) -> Runner:
    """Depthwise NCHW convolution (weight (C, 1, R, S), stride 1) with no schedule."""
    from tvm import te, tirx

    nb, c, h, wd = x.shape
    rr, ss = w.shape[2:]
    X = te.placeholder(x.shape, "float32", name="X")
    W = te.placeholder(w.shape, "float32", name="W")
    inside = lambda y, v: tirx.all(y >= pad, y < h + pad, v >= pad, v < wd + pad)  # noqa: E731
    Xp = te.compute((nb, c, h + 2 * pad, wd + 2 * pad),
                    lambda n_, ch, y, v: tirx.if_then_else(
                        inside(y, v), X[n_, ch, tirx.max(tirx.min(y - pad, h - 1), 0),
                                        tirx.max(tirx.min(v - pad, wd - 1), 0)],
                        tirx.const(0.0, "float32")), name="Xp")
    r = te.reduce_axis((0, rr), name="r")
    s = te.reduce_axis((0, ss), name="s")
    Y = te.compute(x.shape, lambda n_, ch, y, v: te.sum(Xp[n_, ch, y + r, v + s] * W[ch, 0, r, s],
                                                         axis=[r, s]), name="Y")
    lib = tvm.compile(tvm.IRModule({"main": te.create_prim_func([X, W, Y])}),
                      target=tvm_target(threads))
    return _run(tvm, lib, [x, w], x.shape)


BUILDERS: dict[str, Callable[..., Runner]] = {"matmul": matmul, "depthwise": depthwise}
