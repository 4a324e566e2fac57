# SPDX-License-Identifier: Apache-2.0
"""Sampling primitives: draws recorded with their decisions, reproducible with a seed, replayed
with other decisions into another legal schedule, invalid decisions refused."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def _scale(n=100, m=37):
    A = pl.placeholder((n, m), "float32", name="A")
    return pl.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")


def _tiled(seed, decision=None):
    sch = pl.Schedule(_scale(), seed=seed)
    i, j = sch.get_loops("B")
    f = sch.sample_perfect_tile(i, n=3, max_innermost=8, decision=decision)
    sch.split(i, factors=f)
    v = sch.sample_categorical([1, 2, 4])
    sch.split(j, factors=[None, v])
    return sch, f


def _run(sch, a):
    out = np.full(a.shape, np.nan, "float32")
    pl.build(sch)(a, out)
    return out


def test_same_seed_same_decisions_and_product_covers_extent():
    (s1, f1), (s2, f2) = _tiled(3), _tiled(3)
    assert f1 == f2 and s1.trace.to_json() == s2.trace.to_json()
    assert f1[0] * f1[1] * f1[2] >= 100 and f1[2] <= 8
    assert "decision=" in str(s1.trace)


def test_seeds_give_several_points_of_the_space():
    drawn = {tuple(_tiled(seed)[1]) for seed in range(12)}
    assert len(drawn) > 3


def test_replay_with_other_decisions_gives_another_correct_schedule():
    sch, _ = _tiled(0)
    a = np.random.default_rng(1).standard_normal((100, 37)).astype("float32")
    other = pl.Schedule.from_trace(_scale(), sch.trace.to_json(),
                                   decisions={1: [25, 2, 2], 3: 2})
    text = str(other)
    assert "range(25)" in text and "range(2)" in text
    assert other.trace.to_json() != sch.trace.to_json()
    np.testing.assert_allclose(_run(other, a), a * 2.0)
    same = pl.Schedule.from_trace(_scale(), sch.trace)
    assert same.trace.to_json() == sch.trace.to_json()


@pytest.mark.parametrize("decision", [[25, 2, 3], [4, 5, 9], [25, 2], "x"])
def test_invalid_tile_decision_refused(decision):
    sch, _ = _tiled(0)
    with pytest.raises(pl.ScheduleError, match="invalid"):
        pl.Schedule.from_trace(_scale(), sch.trace, decisions={1: decision})


def test_symbolic_extent_draws_from_candidates():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = pl.Schedule(B, seed=5)
    (i,) = sch.get_loops("B")
    f = sch.sample_perfect_tile(i, n=3, max_innermost=4)
    assert f[0] is None and f[2] <= 4
    sch.split(i, factors=f)
    a = np.random.default_rng(0).standard_normal(13).astype("float32")
    np.testing.assert_allclose(_run(sch, a), a + 1.0)
    with pytest.raises(pl.ScheduleError, match="symbolic"):
        pl.Schedule(B).sample_perfect_tile(pl.Schedule(B).get_loops("B")[0], n=2,
                                           decision=[4, 4])


def test_categorical_decision_checked():
    sch = pl.Schedule(_scale())
    assert sch.sample_categorical(["a", "b"], [0.0, 1.0]) == "b"
    with pytest.raises(pl.ScheduleError, match="index from 0 to 1"):
        sch.sample_categorical(["a", "b"], decision=2)
    with pytest.raises(pl.ScheduleError, match="weights"):
        sch.sample_categorical(["a", "b"], [1.0])


def test_compute_location_offers_legal_loops_only():
    A = pl.placeholder((20, 9), "float32", name="A")
    B = pl.compute((20, 9), lambda i, j: A[i, j] + 1.0, name="B")
    C = pl.compute((20, 9), lambda i, j: B[i, j] * 3.0, name="C")
    a = np.random.default_rng(2).standard_normal((20, 9)).astype("float32")
    for decision in (-1, 0, 1):
        sch = pl.Schedule(C)
        loc = sch.sample_compute_location("B", decision=decision)
        if loc is not None:
            sch.compute_at("B", loc)
        np.testing.assert_allclose(_run(sch, a), (a + 1.0) * 3.0, rtol=1e-6)
    with pytest.raises(pl.ScheduleError, match="invalid"):
        pl.Schedule(C).sample_compute_location("B", decision=7)


def test_printed_trace_of_a_symbolic_tile_is_python_that_replays_it(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = pl.Schedule(B, seed=1)
    loop = sch.get_loops("B")[0]
    sch.split(loop, factors=sch.sample_perfect_tile(loop, n=3))
    text = str(sch.trace)
    assert "_, v1_1, v1_2 = sch.sample_perfect_tile" in text   # the None factor is no target
    again = pl.Schedule(B)
    exec(compile(text, "<trace>", "exec"), {"sch": again})  # the test's own text, not a user's
    assert str(again) == str(sch)
    a = rng.standard_normal(45).astype("float32")
    np.testing.assert_array_equal(_run(again, a), a + 1.0)
