# SPDX-License-Identifier: Apache-2.0
"""A matmul schedule built on a register-tile micro-kernel (GotoBLAS-like, public primitives).

B is packed into panels of ``cols`` columns (contiguous along k) and A, optionally, into panels
of ``rows`` rows; both packing copies run in parallel. The loops are
``j0 (parallel) > k0 (kc) > i0 > [k1 > i1 > j1]`` (one parallel region), or with
``k_outer=True`` ``k0 > j0 (parallel) > i0 > [...]`` (the kc-deep slice of A stays in L2 for
all the B panels, at the price of one parallel region per slice); the bracketed nest becomes
one call of the micro-kernel while a kc-deep slice of a B panel stays in L1/L2.

>>> import polyloop as pl
>>> from polyloop.intrin import gemm_intrin
>>> from polyloop.intrin.matmul import schedule_matmul
>>> A = pl.placeholder((64, 64), "float32", name="A")
>>> B = pl.placeholder((64, 64), "float32", name="B")
>>> k = pl.reduce_axis((0, 64), name="k")
>>> C = pl.compute((64, 64), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
>>> sch = schedule_matmul(pl.Schedule(C), "C", gemm_intrin("portable"), kc=32)
>>> "tensorize" in str(sch)
True
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import Const, loads
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin


def schedule_matmul(sch: Schedule, block: str, intrin: TensorIntrin, *, kc: int = 256,
                    parallel: bool = True, k_outer: bool = False) -> Schedule:
    """Schedule ``block`` (``C[i, j] += A[i, k] * B[k, j]``) of ``sch`` around ``intrin``
    (from ``gemm_intrin``; ``packed_a`` intrinsics get A packed too). Returns ``sch``."""
    stmt = next(s for s in sch.program.statements if s.block_name == block and not s.is_init)
    reads = [ld.buffer for ld in loads(stmt.value)]
    if len(reads) != 2:
        raise ScheduleError(f"schedule_matmul: block '{block}' reads {reads}, expected A and B")
    a, b = reads
    rows, cols, _ = intrin.extents
    # a packed-A description reads a[k, i]: its first dimension is the symbolic kc
    packed_a = not isinstance(intrin.program.buffer(intrin.operands[1]).shape[0], Const)
    sch.transform_layout(block, b, lambda k, j: (j // cols, k, j % cols))
    if packed_a:
        sch.transform_layout(block, a, lambda i, k: (i // rows, k, i % rows))
    c = sch.get_block(block)
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    k0, k1 = sch.split(k, [None, kc])
    sch.reorder(*((k0, j0) if k_outer else (j0, k0)), i0, k1, i1, j1)
    init = sch.decompose_reduction(c, k0)
    sch.tensorize(k1, intrin)
    if parallel:
        sch.parallel(j0)
        if k_outer:
            sch.parallel(sch.get_loops(init)[0])
    x0, x1 = sch.get_loops(f"{b}_packed_in")
    x10, x11 = sch.split(x1, [None, cols])
    sch.reorder(x10, x0, x11)
    if parallel:
        sch.parallel(x10)
    if packed_a:
        y0, y1 = sch.get_loops(f"{a}_packed_in")
        y00, y01 = sch.split(y0, [None, rows])
        sch.reorder(y00, y1, y01)
        if parallel:
            sch.parallel(y00)
    return sch
