# SPDX-License-Identifier: Apache-2.0
"""A program written as imperfect loop nests keeps its order: default schedule, dependences and
the reference interpreter all follow ``Program.nesting``."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.errors import PolyloopError
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var
from polyloop.ir.program import Buffer, BufferRole, Program, Statement, param
from polyloop.poly.order import instance_key, original_tree
from polyloop.poly.tree import LoopNode, StmtNode
from polyloop.testing import interpret


def _prefix_sum_program(nesting: bool) -> Program:
    """for i: A[i] = A[i] + 1 ; B[i] = A[i + 1]   (B sees the old A[i+1] only when nested)."""
    n = param("n")
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INOUT)
    B = Buffer("B", (n,), DType.FLOAT64, BufferRole.OUTPUT)
    i = Var("i")
    s0 = Statement("S0", ("i",), "[n] -> { S0[i] : 0 <= i < n - 1 }", "A", (i,), A[i] + 1.0)
    s1 = Statement("S1", ("i",), "[n] -> { S1[i] : 0 <= i < n - 1 }", "B", (i,), A[i + 1])
    order = (("S0", (0, 0)), ("S1", (0, 1))) if nesting else ()
    return Program("p", (A, B), (s0, s1), ("n",), ("A", "B"), nesting=order)


def test_the_tree_shares_loops_of_statements_at_equal_positions():
    root, next_id = original_tree(_prefix_sum_program(True))
    assert len(root.children) == 1 and next_id == 1
    loop = root.children[0]
    assert isinstance(loop, LoopNode) and loop.name == "i"
    assert [c.statement for c in loop.children if isinstance(c, StmtNode)] == ["S0", "S1"]


def test_without_nesting_each_statement_has_its_own_nest():
    root, next_id = original_tree(_prefix_sum_program(False))
    assert len(root.children) == 2 and next_id == 2


@pytest.mark.parametrize("nesting", [True, False])
def test_interpreter_and_build_follow_the_written_order(nesting):
    prog = _prefix_sum_program(nesting)
    a = np.arange(7, dtype="float64")
    expected_b = np.zeros(7)
    # nested: B[i] reads A[i+1] before the loop reaches it; distributed: after
    a_after = np.concatenate([a[:-1] + 1.0, a[-1:]])
    expected_b[:-1] = a[1:] if nesting else a_after[1:]
    ref_a, got_a = a.copy(), a.copy()
    ref_b, got_b = np.zeros(7), np.zeros(7)
    interpret(prog, A=ref_a, B=ref_b)
    pl.build(prog)(got_a, got_b)
    np.testing.assert_array_equal(ref_b, expected_b)
    np.testing.assert_array_equal(got_b, expected_b)
    np.testing.assert_array_equal(got_a, ref_a)


def test_dependences_follow_the_written_order():
    text = str(pl.dependences(_prefix_sum_program(True)))
    assert "WAR S1 -> S0 on A" in text


def test_positions_must_describe_a_tree():
    prog = _prefix_sum_program(True).replace(nesting=(("S0", (0, 0)), ("S1", (0, 0))))
    with pytest.raises(PolyloopError, match="collide"):
        original_tree(prog)


def test_instance_keys_interleave_positions_and_iterators():
    assert instance_key((0, 1, 2), (5, 7)) == (0, 5, 1, 7, 2)
