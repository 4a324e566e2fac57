# SPDX-License-Identifier: Apache-2.0
"""Barrier placement for loop-carried pairs two or more iterations apart (a double-buffered
tile: step k + 2 refills what step k read): any barrier of the loop's body orders them, run
by the iteration between, unless the loop skips iterations (then that barrier may not run)."""
from __future__ import annotations

import polyloop as pl
from polyloop.ir.loops import LoopKind
from polyloop.ir.thread_axis import ThreadAxis
from polyloop.poly import gpu
from polyloop.poly.loop_expr import LoopExpr
from polyloop.poly.tree import LoopNode, Root, StmtNode
from polyloop.schedule.kernel import schedule_of


def _loop(id_: int, name: str, stmts, children, thread=None) -> LoopNode:
    exprs = tuple((s, LoopExpr(f"{{ {s}[i, k] -> [({name})] }}")) for s in stmts)
    kind = LoopKind.THREAD if thread else LoopKind.SERIAL
    return LoopNode(id_, name, exprs, tuple(children), kind, thread=thread)


def _tree() -> Root:
    """for k: (for i on threadIdx.x: w) (for i on threadIdx.x: r)"""
    w = _loop(1, "i", ["w"], [StmtNode("w")], ThreadAxis.THREAD_X)
    r = _loop(2, "i", ["r"], [StmtNode("r")], ThreadAxis.THREAD_X)
    return Root((_loop(0, "k", ["w", "r"], [w, r]),))


def _gaps(extra: str):
    """r reads what w wrote in this iteration (a barrier between them) and what w writes two
    iterations later (on other work-items: the later write must wait for this read)."""
    knl = pl.make_kernel("{ [i, k] : 0 <= i < 16 and 0 <= k < 8" + extra + " }",
                         "t[i, k] = a[i, k] {id=w}\n"
                         "b[i, k] = t[15 - i, k] + t[15 - i, k + 2] {id=r, dep=w}")
    return gpu.barrier_gaps(schedule_of(knl).program, _tree())


def test_a_pair_two_iterations_apart_is_ordered_by_the_barrier_between():
    assert _gaps("") == [gpu.Gap(0, 1, True)]


def test_a_loop_that_skips_iterations_keeps_the_barrier_at_the_end():
    # k runs 0, 2, 4, 6 only: between k and k + 2 no iteration runs the first barrier
    assert _gaps(" and k mod 2 = 0") == [gpu.Gap(0, 1, True), gpu.Gap(0, 2, True)]
