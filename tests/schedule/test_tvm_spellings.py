# SPDX-License-Identifier: Apache-2.0
"""Schedules and builds spelled as TVM users spell them: ``split(loop, factor=8)``,
``split(loop, nparts=4)`` and ``pl.build(sch, [A, B, C], target="c")``."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def _add(n):
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    C = pl.compute((n,), lambda i: A[i] + B[i], name="C")
    return A, B, C


def _run(sch, size, rng, args=None):
    a, b = (rng.standard_normal(size).astype("float32") for _ in range(2))
    c = np.full(size, np.nan, "float32")
    mod = pl.build(sch, args, target="c") if args is not None else pl.build(sch)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("size", [1, 7, 37])
def test_split_factor_on_a_symbolic_loop(size, rng):
    A, B, C = _add(pl.var("n"))
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, factor=8)
    assert dict(sch.trace.steps[-1].kwargs)["factors"] == [None, 8]
    _run(sch, size, rng)


def test_split_nparts_on_a_constant_loop(rng):
    A, B, C = _add(37)
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, nparts=4)
    assert "for i_0 in range(4)" in str(sch)
    _run(sch, 37, rng)
    assert str(pl.Schedule.from_trace(C, sch.trace)) == str(sch)   # recorded as factors


def test_split_nparts_on_a_symbolic_loop_refuses_too_many_parts():
    A, B, C = _add(pl.var("n"))
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    before = str(sch)
    with pytest.raises(pl.ScheduleError, match=r"nparts.*symbolic extent.*\[1, 64\].*factor="):
        sch.split(i, nparts=1000)
    assert str(sch) == before


def test_split_takes_one_spelling():
    A, B, C = _add(16)
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(pl.ScheduleError, match="takes one of factors"):
        sch.split(i, [None, 4], factor=4)


def test_build_with_the_argument_list(rng):
    A, B, C = _add(pl.var("n"))
    sch = pl.Schedule(C)
    _run(sch, 11, rng, args=[A, B, C])


def test_build_with_a_wrong_argument_order_names_both():
    A, B, C = _add(8)
    with pytest.raises(pl.PolyloopError, match=r"build\(sch, \[C, A, B\]\).*\[A, B, C\]"):
        pl.build(pl.Schedule(C), [C, A, B], target="c")


def test_build_second_argument_must_be_a_target_or_a_list():
    A, B, C = _add(8)
    with pytest.raises(pl.PolyloopError, match="second argument is the target"):
        pl.build(C, 3)


def _stencil_pair(n):
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = pl.compute((n - 2,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    return A, B, C


def test_compute_root_undoes_compute_at(rng):
    A, B, C = _stencil_pair(13)
    sch = pl.Schedule(C)
    before = str(sch)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    assert str(sch) != before
    sch.compute_root(sch.get_block("B"))
    assert str(sch) == before
    assert [s.primitive for s in sch.trace.steps][-1] == "compute_root"
    a = rng.standard_normal(13).astype("float32")
    c = np.full(11, np.nan, "float32")
    pl.build(sch)(a, c)
    np.testing.assert_allclose(c, 2 * (a[:-2] + a[1:-1] + a[2:]), rtol=1e-6)


def test_compute_root_of_a_reverse_computed_consumer_goes_after(rng):
    A, B, C = _stencil_pair(pl.var("n"))
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    sch.compute_root(sch.get_block("C"))
    a = rng.standard_normal(9).astype("float32")
    np.testing.assert_allclose(pl.build(sch)(a), 2 * (a[:-2] + a[1:-1] + a[2:]), rtol=1e-6)


def test_compute_root_at_the_root_changes_nothing():
    A, B, C = _stencil_pair(16)
    sch = pl.Schedule(C)
    before = str(sch)
    sch.compute_root(sch.get_block("B"))
    assert str(sch) == before
