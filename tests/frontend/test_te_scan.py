# SPDX-License-Identifier: Apache-2.0
"""``pl.scan`` (TVM's ``tvm.scan``): recurrences along the first axis, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def cumsum(m, n):
    X = pl.placeholder((m, n), "float32", name="X")
    s_state = pl.placeholder((m, n), "float32", name="s_state")
    s_init = pl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s_update = pl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    return X, pl.scan(s_init, s_update, s_state, inputs=[X], name="s")


@pytest.mark.parametrize("shape", [(1, 3), (7, 5), (12, 1)])
def test_cumulative_sum_at_symbolic_sizes(shape, rng):
    X, s = cumsum(pl.var("m"), pl.var("n"))
    x = rng.standard_normal(shape).astype("float32")
    got = np.full(shape, np.nan, "float32")
    pl.build(s)(x, got)
    np.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_inner_axis_runs_in_parallel_but_rows_stay_in_order(rng):
    X, s = cumsum(pl.var("m"), pl.var("n"))
    sch = pl.Schedule(s)
    t, i = sch.get_loops(sch.get_block("s"))
    sch.parallel(i)
    with pytest.raises(pl.ScheduleError):
        sch.parallel(t)
    x = rng.standard_normal((6, 9)).astype("float32")
    np.testing.assert_allclose(pl.build(sch)(x), np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)


def test_second_order_recurrence_with_two_init_rows(rng):
    m = pl.var("m")
    X = pl.placeholder((m, 4), "float64", name="X")
    f = pl.placeholder((m, 4), "float64", name="f")
    init = pl.compute((2, 4), lambda t, i: X[t, i], name="f0")
    upd = pl.compute((m, 4), lambda t, i: 0.5 * f[t - 1, i] + 0.25 * f[t - 2, i] + X[t, i],
                     name="f1")
    F = pl.scan(init, upd, f, name="F")
    x = rng.standard_normal((9, 4))
    expected = x.copy()
    for t in range(2, 9):
        expected[t] = 0.5 * expected[t - 1] + 0.25 * expected[t - 2] + x[t]
    np.testing.assert_allclose(pl.build(F)(x), expected, rtol=1e-12)


def test_reading_the_current_row_is_refused():
    m, n = pl.var("m"), pl.var("n")
    X = pl.placeholder((m, n), "float32", name="X")
    s = pl.placeholder((m, n), "float32", name="s")
    init = pl.compute((1, n), lambda t, i: X[0, i], name="s0")
    upd = pl.compute((m, n), lambda t, i: s[t, i] + X[t, i], name="s1")
    with pytest.raises(pl.PolyloopError, match=r"only be read by later rows.*t - 1"):
        pl.scan(init, upd, s)


def test_state_must_be_a_placeholder():
    X, s = cumsum(pl.var("m"), pl.var("n"))
    with pytest.raises(pl.PolyloopError, match="must be a pl.placeholder"):
        pl.scan(s, s, s)
