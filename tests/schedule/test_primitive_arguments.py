# SPDX-License-Identifier: Apache-2.0
"""Wrong plain arguments to schedule primitives (counts, types, duplicates, names, handles of
another schedule) are refused with a ScheduleError that names the argument, and the schedule
is left exactly as it was."""
from __future__ import annotations

import pytest

import polyloop as pl

from .programs import check_matmul_relu, matmul_relu, matmul_sch, refused_unchanged


def other_program_loop() -> pl.LoopHandle:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    Z = pl.compute((n,), lambda z: A[z] + 1.0, name="Z")
    other = pl.Schedule(Z)
    return other.get_loops(other.get_block("Z"))[0]


CASES = [
    ("reorder()", lambda s, i, j, k: s.reorder(), "reorder needs at least one loop"),
    ("reorder(i, i)", lambda s, i, j, k: s.reorder(i, j, i), "listed twice"),
    ("tile(i, i)", lambda s, i, j, k: s.tile(i, i, 2, 2), "loop 'i' is listed twice"),
    ("tile(i, j, 0, 2)", lambda s, i, j, k: s.tile(i, j, 0, 2), "first tile size"),
    ("tile(i, j, 2, True)", lambda s, i, j, k: s.tile(i, j, 2, True), "second tile size"),
    ("unroll(j, True)", lambda s, i, j, k: s.unroll(j, True), "got True (bool)"),
    ("unroll(j, 2**70)", lambda s, i, j, k: s.unroll(j, 2**70), "positive integer"),
    ("split(j, 4)", lambda s, i, j, k: s.split(j, 4), "factors must be a list"),
    ("split(j, '48')", lambda s, i, j, k: s.split(j, "48"), "factors must be a list"),
    ("split(j, [None, 2**70])", lambda s, i, j, k: s.split(j, [None, 2**70]), "2**62"),
    ("split names twice", lambda s, i, j, k: s.split(j, [None, 4], names=["a", "a"]),
     "given twice"),
    ("split names not names", lambda s, i, j, k: s.split(j, [None, 4], names=["a b", "c"]),
     "ASCII identifier"),
    ("split names isl keyword", lambda s, i, j, k: s.split(j, [None, 4], names=["max", "c"]),
     "isl keyword"),
    ("split names a string", lambda s, i, j, k: s.split(j, [None, 4], names="ab"),
     "list of loop names"),
    ("fuse(i, i)", lambda s, i, j, k: s.fuse(i, i), "listed twice"),
    ("fuse name", lambda s, i, j, k: s.fuse(i, j, name="i j"), "ASCII identifier"),
    ("skew(i, i)", lambda s, i, j, k: s.skew(i, i), "listed twice"),
    ("merge(i, i)", lambda s, i, j, k: s.merge(i, i), "listed twice"),
    ("annotate key", lambda s, i, j, k: s.annotate(i, 3, "x"), "key must be a word"),
    ("annotate value", lambda s, i, j, k: s.annotate(i, "note", object()),
     "must be a string or a number"),
    ("rfactor axis", lambda s, i, j, k: s.rfactor(k, True), "factor_axis"),
    ("rfactor negative axis", lambda s, i, j, k: s.rfactor(k, -1), "factor_axis"),
    ("transform_layout raising map", lambda s, i, j, k: s.transform_layout(
        "C", "B", lambda a, b: (a + 1 // 0, b)), "raised ZeroDivisionError"),
    ("transform_layout not a function", lambda s, i, j, k: s.transform_layout("C", "B", 3),
     "must be a function"),
    ("handle of another schedule", lambda s, i, j, k: s.parallel(other_program_loop()),
     "is not a loop of this schedule"),
]


@pytest.mark.parametrize("label, call, message", CASES, ids=[c[0] for c in CASES])
def test_wrong_arguments_are_refused_and_change_nothing(label, call, message):
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: call(sch, i, j, k), message)


def test_the_schedule_still_works_after_refusals(rng):
    sch = pl.Schedule(matmul_relu())
    i, j, k = sch.get_loops(sch.get_block("C"))
    for label, call, _ in CASES:
        with pytest.raises(pl.ScheduleError):
            call(sch, i, j, k)
    sch.annotate(i, "note", 3)
    j0, j1 = sch.split(j, [None, 4], names=["j_outer", "j_inner"])
    sch.unroll(j1, 2)
    check_matmul_relu(sch, rng, sizes=(1, 7))
