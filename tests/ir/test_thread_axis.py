# SPDX-License-Identifier: Apache-2.0
"""GPU axes are parsed once, where the user typed them, into a ThreadAxis."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.ir.thread_axis import AxisLevel, ThreadAxis, parse_thread_axis


@pytest.mark.parametrize("text, axis", [
    ("blockIdx.x", ThreadAxis.BLOCK_X), ("blockIdx.z", ThreadAxis.BLOCK_Z),
    ("threadIdx.y", ThreadAxis.THREAD_Y), ("g.0", ThreadAxis.BLOCK_X),
    ("g.2", ThreadAxis.BLOCK_Z), ("l.1", ThreadAxis.THREAD_Y), (" l.0 ", ThreadAxis.THREAD_X),
    (ThreadAxis.THREAD_Z, ThreadAxis.THREAD_Z)])
def test_every_spelling_names_one_axis(text, axis):
    assert parse_thread_axis(text) is axis


def test_an_axis_knows_its_level_and_dimension():
    assert [(a.level, a.dim) for a in ThreadAxis] == [
        (lvl, d) for lvl in (AxisLevel.GROUP, AxisLevel.ITEM) for d in range(3)]
    assert ThreadAxis.of(AxisLevel.ITEM, 2) is ThreadAxis.THREAD_Z
    assert str(ThreadAxis.BLOCK_Y) == "blockIdx.y"


@pytest.mark.parametrize("text", ["threadIdx.w", "g.3", "l", "vthread", "blockidx.x", ""])
def test_an_unknown_spelling_is_refused_with_the_valid_ones(text):
    with pytest.raises(pl.ScheduleError, match=r"unknown thread axis .*valid: blockIdx.x.*g\.0"):
        parse_thread_axis(text)


def test_bind_takes_kernel_tags_and_records_the_canonical_axis():
    A = pl.placeholder((100,), "float32", name="A")
    sch = pl.Schedule(pl.compute((100,), lambda i: A[i] * 2, name="B"))
    io, ii = sch.split(sch.get_loops("B")[0], factors=[None, 32])
    sch.bind(io, "g.0")
    sch.bind(ii, ThreadAxis.THREAD_X)
    assert sch.state.loop(io.id).thread is ThreadAxis.BLOCK_X
    assert "bind(4, 'blockIdx.x')" in str(sch) and "'threadIdx.x'" in str(sch)
    replayed = pl.Schedule.from_trace(sch.original, sch.trace)
    assert str(replayed) == str(sch)
