# SPDX-License-Identifier: Apache-2.0
"""Barrier placement on hand-made loop trees: a barrier exactly where two work-items of a group
touch one element in an order only a barrier enforces (between the children of a sequential
loop, and at the end of its body when the next iteration depends on this one); a refusal when
the two ends are inside one work-item loop."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.ir.loops import LoopKind
from polyloop.ir.thread_axis import ThreadAxis
from polyloop.poly import gpu
from polyloop.poly.isl_text import iterator_expr
from polyloop.poly.tree import LoopNode, Root, StmtNode
from polyloop.schedule.kernel import schedule_of


def _program(read: str):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < 16 and 0 <= k < 4 }",
                         f"t[i] = a[i, k] {{id=w}}\nb[i, k] = t[{read}] {{id=r, dep=w}}")
    return schedule_of(knl).program


def _loop(id_: int, name: str, stmts, children, thread=None) -> LoopNode:
    exprs = tuple((s, iterator_expr(s, ("i", "k"), name)) for s in stmts)
    kind = LoopKind.THREAD if thread else LoopKind.SERIAL
    return LoopNode(id_, name, exprs, tuple(children), kind, thread=thread)


def _k_over_two_item_loops() -> Root:
    """for k: (for i on threadIdx.x: w) (for i on threadIdx.x: r)"""
    w = _loop(1, "i", ["w"], [StmtNode("w")], ThreadAxis.THREAD_X)
    r = _loop(2, "i", ["r"], [StmtNode("r")], ThreadAxis.THREAD_X)
    return Root((_loop(0, "k", ["w", "r"], [w, r]),))


def test_another_work_items_element_needs_a_barrier_after_the_write_and_before_the_next():
    gaps = gpu.barrier_gaps(_program("15 - i"), _k_over_two_item_loops())
    # RAW w -> r in one iteration of k; WAR r -> w of the next iteration (global memory: t)
    assert gaps == [gpu.Gap(0, 1, True), gpu.Gap(0, 2, True)]


def test_each_work_items_own_element_needs_no_barrier():
    assert gpu.barrier_gaps(_program("i"), _k_over_two_item_loops()) == []


def test_two_work_items_inside_one_work_item_loop_are_refused():
    inner = _loop(1, "k", ["w", "r"], [StmtNode("w"), StmtNode("r")])
    root = Root((_loop(0, "i", ["w", "r"], [inner], ThreadAxis.THREAD_X),))
    with pytest.raises(pl.BuildError, match="RAW dependence w -> r on 't' links different "
                                            "work-items inside loop 'i'"):
        gpu.barrier_gaps(_program("15 - i"), root)
