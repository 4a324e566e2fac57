# SPDX-License-Identifier: Apache-2.0
"""Navigation (blocks, loops, producers, consumers), wrong handles, and the rule that a refused
primitive leaves the schedule exactly as it was (same text, same trace)."""
from __future__ import annotations

import pytest

import polyloop as pl

from .programs import conv2d, lines, matmul_sch, raises_schedule_error, refused_unchanged


def test_navigation_of_the_matmul_relu():
    sch, (i, j, k) = matmul_sch()
    assert sch.blocks() == [pl.BlockHandle("C"), pl.BlockHandle("D")]
    assert [x.name for x in (i, j, k)] == ["i", "j", "k"]
    assert sch.get_block("C") == pl.BlockHandle("C")
    assert sch.get_loops(sch.get_block("D")) == sch.get_loops("D")
    assert sch.get_producers("D") == [pl.BlockHandle("C")]
    assert sch.get_consumers("C") == [pl.BlockHandle("D")]
    assert sch.get_producers("C") == [] and sch.get_consumers("D") == []


def test_navigation_of_the_padded_conv():
    sch = pl.Schedule(conv2d(1, 2, 3, 5, 5))
    assert sch.blocks() == [pl.BlockHandle("P"), pl.BlockHandle("O")]
    assert [x.name for x in sch.get_loops("O")] == ["b", "o", "y", "x", "rc", "rh", "rw"]
    assert sch.get_producers("O") == [pl.BlockHandle("P")]


def test_the_init_of_a_reduction_is_a_block_of_its_own():
    sch, (i, j, k) = matmul_sch()
    init = sch.decompose_reduction("C", k)
    assert init == pl.BlockHandle("C_init")
    # the loops it shares with the update, then its own (one iteration each, not printed)
    assert [x.name for x in sch.get_loops(init)] == ["i", "j", "i", "j"]


@pytest.mark.parametrize("name", ["E", "c", "", "C_rf"])
def test_unknown_block_names(name):
    sch, _ = matmul_sch()
    raises_schedule_error(lambda: sch.get_block(name), f"no block named '{name}'", "blocks: C, D")
    raises_schedule_error(lambda: sch.get_loops(name), f"no block named '{name}'")


def test_a_block_where_a_loop_is_expected_and_the_reverse():
    sch, (i, j, k) = matmul_sch()
    raises_schedule_error(lambda: sch.parallel(sch.get_block("C")), "parallelize",
                          "expected a loop")
    raises_schedule_error(lambda: sch.compute_inline(i), "compute_inline",
                          "expected a block from get_block")


def test_loops_replaced_by_a_primitive_are_refused_by_every_later_one():
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 4])
    f = sch.fuse(j0, j1)
    for call in (lambda: sch.reorder(j0, i), lambda: sch.vectorize(j1),
                 lambda: sch.unroll(j0), lambda: sch.fuse(j0, j1),
                 lambda: sch.compute_at("C", j0)):
        refused_unchanged(sch, call, "is no longer in the schedule")
    assert f.name == "j_0_j_1_fused"


def _illegal_calls():
    """(primitive, a call that must be refused) on the default matmul + ReLU schedule."""
    return [
        ("split", lambda s, i, j, k, d: s.split(k, factors=[None, 0])),
        ("reorder", lambda s, i, j, k, d: s.reorder(k, d[0])),
        ("tile", lambda s, i, j, k, d: s.tile(i, d[1], 4, 4)),
        ("fuse", lambda s, i, j, k, d: s.fuse(i, k)),
        ("skew", lambda s, i, j, k, d: s.skew(j, i, 1)),
        ("reverse", lambda s, i, j, k, d: s.reverse("i")),
        ("parallel", lambda s, i, j, k, d: s.parallel(k)),
        ("vectorize", lambda s, i, j, k, d: s.vectorize(i)),
        ("unroll", lambda s, i, j, k, d: s.unroll(k, factor=0)),
        ("bind", lambda s, i, j, k, d: s.bind(k, "threadIdx.x")),
        ("annotate", lambda s, i, j, k, d: s.annotate("k", "x", 1)),
        ("compute_at", lambda s, i, j, k, d: s.compute_at("D", i)),
        ("reverse_compute_at", lambda s, i, j, k, d: s.reverse_compute_at("C", d[0])),
        ("decompose_reduction", lambda s, i, j, k, d: s.decompose_reduction("D", i)),
        ("compute_inline", lambda s, i, j, k, d: s.compute_inline("C")),
        ("reverse_compute_inline", lambda s, i, j, k, d: s.reverse_compute_inline("D")),
        ("cache_read", lambda s, i, j, k, d: s.cache_read("C", "A", "texture")),
        ("cache_write", lambda s, i, j, k, d: s.cache_write("D", "registers")),
        ("rfactor", lambda s, i, j, k, d: s.rfactor(j)),
        ("transform_layout", lambda s, i, j, k, d: s.transform_layout("C", "A", lambda a, b: (a,))),
    ]


@pytest.mark.parametrize("primitive, call", _illegal_calls(), ids=[p for p, _ in _illegal_calls()])
def test_a_refused_primitive_leaves_the_schedule_unchanged(primitive, call):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])       # a non-trivial starting point
    sch.reorder(i, j0, k, j1)
    d = sch.get_loops("D")
    text, steps, program = str(sch), len(sch.trace), sch.program
    with pytest.raises(pl.ScheduleError):
        call(sch, i, j1, k, d)
    assert str(sch) == text
    assert len(sch.trace) == steps
    assert sch.program is program
    sch.vectorize(j1)                               # and it still works afterwards
    assert "for j_1 in vectorized(" in "\n".join(lines(sch))
