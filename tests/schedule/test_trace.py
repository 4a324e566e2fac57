# SPDX-License-Identifier: Apache-2.0
"""Every primitive is recorded: ``str(sch.trace)`` is Python that replays it, and
``to_json`` / ``Schedule.from_trace`` round-trip it to the same schedule and results."""
from __future__ import annotations

import json

import numpy as np

import polyloop as pl

from .programs import (check_matmul_relu, check_stencil, matmul_relu, refused_unchanged,
                       stencil)


def _every_kind_of_step(sch: pl.Schedule) -> pl.Schedule:
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    sch.annotate(j0, "note", "x")
    sch.reverse_compute_at(sch.get_block("D"), j0)
    init = sch.decompose_reduction(c, k)
    sch.unroll(sch.get_loops(init)[-1], factor=2)
    sch.transform_layout(c, "B", lambda kk, jj: (jj // 16, kk, jj % 16))
    ca = sch.cache_read(c, "A", "local")
    sch.compute_at(ca, i)
    return sch


def test_trace_prints_as_python_that_replays(rng):
    sch = _every_kind_of_step(pl.Schedule(matmul_relu()))
    text = str(sch.trace)
    assert text.splitlines()[:3] == [
        "l2, l3, l4 = sch.get_loops(sch.get_block('C'))",
        "l7, l8 = sch.split(l3, factors=[None, 8])",
        "sch.reorder(l2, l7, l4, l8)",
    ]
    assert "b_C_init = sch.decompose_reduction(sch.get_block('C'), l4)" in text
    assert ("sch.transform_layout(sch.get_block('C'), 'B', "
            "lambda x0, x1: (x1 // 16, x0, x1 % 16,))") in text
    assert "b_A_local = sch.cache_read(sch.get_block('C'), 'A', 'local')" in text
    replay = pl.Schedule(matmul_relu())
    exec(compile(text, "<trace>", "exec"), {"sch": replay})     # noqa: S102
    assert str(replay) == str(sch)
    check_matmul_relu(replay, rng, sizes=(13, 37))


def test_trace_json_round_trip_gives_the_same_schedule_and_results(rng):
    sch = _every_kind_of_step(pl.Schedule(matmul_relu()))
    text = sch.trace.to_json()
    steps = json.loads(text)
    assert [s["primitive"] for s in steps][:3] == ["get_loops", "split", "reorder"]
    again = pl.Schedule.from_trace(matmul_relu(), text)
    assert str(again) == str(sch)
    assert again.trace.to_json() == text
    assert str(pl.Schedule.from_trace(matmul_relu(), sch.trace)) == str(sch)
    a, b = rng.standard_normal((2, 29, 29), dtype="float32")
    np.testing.assert_array_equal(pl.build(again)(a, b), pl.build(sch)(a, b))


def test_trace_of_the_stencil_wavefront_replays_on_a_program(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, 1)
    sch.reorder(j, i)
    sch.parallel(i)
    again = pl.Schedule.from_trace(stencil(), sch.trace.to_json())
    assert str(again) == str(sch)
    check_stencil(again, rng)


def test_a_refused_primitive_is_not_recorded():
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    before = sch.trace.to_json()
    refused_unchanged(sch, lambda: sch.parallel(i), "cannot parallelize")
    refused_unchanged(sch, lambda: sch.reverse(j), "reverse(j) would break")
    assert sch.trace.to_json() == before


def test_replaying_an_illegal_trace_raises():
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, 1)
    sch.reorder(j, i)
    sch.parallel(i)
    steps = json.loads(sch.trace.to_json())
    steps = [s for s in steps if s["primitive"] != "skew"]   # without the skew: illegal
    try:
        pl.Schedule.from_trace(stencil(), json.dumps(steps))
    except pl.ScheduleError as e:
        assert "cannot parallelize loop 'i'" in str(e)
    else:
        raise AssertionError("an illegal trace was replayed")


def test_copy_is_independent():
    sch = pl.Schedule(matmul_relu())
    i, j, k = sch.get_loops("C")
    other = sch.copy()
    other.split(j, factors=[None, 4])
    assert "j_0" not in str(sch) and "j_0" in str(other)
    assert len(sch.trace) == 1 and len(other.trace) == 2
