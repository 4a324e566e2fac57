# SPDX-License-Identifier: Apache-2.0
"""Errors name only loops that ``print(sch)`` shows: a loop of one iteration (which isl leaves
out of the code, printing its value) is described as such wherever an error names it."""
from __future__ import annotations

import re

import pytest

import polyloop as pl

from .programs import refused_unchanged

HIDDEN = "(it has one iteration, so print(sch) shows its value, not the loop)"


def _row_program():
    """A (1, n) matmul-like row: loops i (one iteration) and j, and a reduction k over (0, 1)."""
    n = pl.var("n")
    A = pl.placeholder((1, n), "float32", name="A")
    B = pl.compute((1, n), lambda i, j: A[i, j] * 2.0, name="B")
    k = pl.reduce_axis((0, 1), name="k")
    C = pl.compute((1, n), lambda i, j: pl.sum(B[i, j] * (k + 1), axis=k), name="C")
    return pl.Schedule(C)


def _assert_names_visible(msg: str, sch: pl.Schedule) -> None:
    """Every loop the message names is printed, or is described as the hidden loop it is."""
    shown = str(sch)
    for m in re.finditer(r"loops? '(\w+)'( \(it has one iteration)?", msg):
        assert f"for {m.group(1)} in" in shown or m.group(2), (m.group(1), msg, shown)


def test_the_program_has_loops_print_does_not_show():
    sch = _row_program()
    i, j, k = sch.get_loops(sch.get_block("C"))
    text = str(sch)
    assert "for j in" in text and "for i in" not in text and "for k in" not in text


def test_vectorize_of_a_hidden_outer_loop_describes_it():
    sch = _row_program()
    i, _, _ = sch.get_loops(sch.get_block("C"))
    msg = refused_unchanged(sch, lambda: sch.vectorize(i), "cannot vectorize loop 'i' " + HIDDEN,
                            "it contains loop 'j'")
    _assert_names_visible(msg, sch)


def test_parallel_inside_a_hidden_parallel_loop_describes_it():
    sch = _row_program()
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    msg = refused_unchanged(sch, lambda: sch.parallel(j), "inside parallel loop 'i' " + HIDDEN)
    _assert_names_visible(msg, sch)


def test_split_and_rfactor_of_a_hidden_loop_describe_it():
    sch = _row_program()
    i, _, k = sch.get_loops(sch.get_block("C"))
    msg = refused_unchanged(sch, lambda: sch.split(i, factors=[None, None]),
                            "split of loop 'i' " + HIDDEN)
    _assert_names_visible(msg, sch)
    msg = refused_unchanged(sch, lambda: sch.rfactor(i, 0), "rfactor: loop 'i' " + HIDDEN)
    _assert_names_visible(msg, sch)


def test_an_imperfect_nest_lists_its_hidden_loops_as_such():
    sch = _row_program()
    b = sch.get_block("B")
    _, j, k = sch.get_loops(sch.get_block("C"))
    sch.compute_at(b, j)
    msg = refused_unchanged(sch, lambda: sch.reorder(k, j), "is not perfectly nested")
    _assert_names_visible(msg, sch)


def test_visible_loops_are_named_plainly():
    sch = _row_program()
    _, j, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(pl.ScheduleError) as info:
        sch.split(j, factors=[None, None])
    assert "loop 'j':" in str(info.value) and "one iteration" not in str(info.value)
