# SPDX-License-Identifier: Apache-2.0
"""The first candidates a tuning run measures: pl.auto_schedule's schedule (as decisions of the
generated space) and the loops as written, so that the tuned kernel is never slower than
either; a resumed run measures neither again; a user's space gets no foreign candidates."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.schedule.sampling import decisions_of
from polyloop.schedule.trace import Trace
from polyloop.tune import space as tune_space
from polyloop.tune.measure import LocalRunner
from polyloop.tune.space import auto_schedule_decisions, auto_schedule_seed, draw, generated_space


@pl.script
def heat_1d(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"],
            T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.125 * (A[i + 1] - 2.0 * A[i] + A[i - 1]) + A[i]
        for i in range(1, n - 1):
            A[i] = 0.125 * (B[i + 1] - 2.0 * B[i] + B[i - 1]) + B[i]


def heat_numpy(a, b, tsteps):
    for _ in range(tsteps):
        b[1:-1] = 0.125 * (a[2:] - 2.0 * a[1:-1] + a[:-2]) + a[1:-1]
        a[1:-1] = 0.125 * (b[2:] - 2.0 * b[1:-1] + b[:-2]) + b[1:-1]


def transpose_add():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    T = pl.compute((n, n), lambda i, j: A[j, i] * 2.0, name="T")      # inlinable
    B = pl.compute((n, n), lambda i, j: T[i, j] + 1.0, name="B")
    return pl.to_program(B)


def is_auto_schedule(trace_json):
    sch = pl.Schedule.from_trace(heat_1d, trace_json)
    return sch.state.root == pl.auto_schedule(heat_1d).state.root


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    work_dir = str(tmp_path_factory.mktemp("seeds"))
    res = pl.tune(heat_1d, trials=3, batch=3, seed=5, sizes={"n": 37, "tsteps": 6},
                  work_dir=work_dir, runner=LocalRunner(repeat=1))
    return res, work_dir


def test_the_auto_schedule_seed_is_the_generated_space_with_auto_schedules_choices():
    prog = transpose_add()
    seed = auto_schedule_seed(prog)
    assert decisions_of(seed.trace) == auto_schedule_decisions(prog) == [1, 0, 1, 0, 0, 0, 0]
    assert seed.state.root == pl.auto_schedule(prog).state.root
    # other decisions give another schedule: the comparison can fail
    decisions = auto_schedule_decisions(prog)
    decisions[3] = 2                                                  # tile=8
    tiled = draw(prog, generated_space, decisions=decisions)
    assert decisions_of(tiled.trace) == decisions
    assert tiled.state.root != seed.state.root
    assert is_auto_schedule(auto_schedule_seed(heat_1d).trace)


def test_a_run_measures_auto_schedule_then_the_default_schedule_first(tuned):
    res, _ = tuned
    first, second = res.history[0], res.history[1]
    assert first.status is Status.OK and second.status is Status.OK
    assert decisions_of(Trace.from_json(first.trace)) == auto_schedule_decisions(heat_1d)
    assert is_auto_schedule(first.trace)
    assert len(Trace.from_json(second.trace)) == 0          # the loops as written
    assert res.seconds <= min(first.seconds, second.seconds)


def test_the_tuned_heat_stencil_equals_numpy_at_other_sizes(tuned, rng):
    res, _ = tuned
    n, tsteps = 53, 5
    a, b = rng.standard_normal(n), np.full(n, np.nan)
    b[0] = b[-1] = 0.0                                   # the border is not written
    a_ref, b_ref = a.copy(), b.copy()
    heat_numpy(a_ref, b_ref, tsteps)
    res.build()(a, b, np.zeros(tsteps), n=n, tsteps=tsteps)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12)
    np.testing.assert_allclose(b, b_ref, rtol=1e-12)


def test_a_resumed_run_does_not_measure_the_seeds_again(tuned):
    res, work_dir = tuned
    again = pl.tune(heat_1d, trials=1, seed=6, sizes={"n": 37, "tsteps": 6},
                    work_dir=work_dir, runner=LocalRunner(repeat=1))
    assert len(again.history) == 1
    known = {r.trace for r in res.history}
    assert again.history[0].trace not in known
    assert again.seconds <= res.seconds


def test_a_users_space_gets_no_seeds(tmp_path):
    def split_space(sch):
        (i,) = sch.get_loops("B")
        sch.split(i, factors=[None, sch.sample_categorical([2, 4])])

    A = pl.placeholder((10,), "float32", name="A")
    B = pl.compute((10,), lambda i: A[i] + 1.0, name="B")
    res = pl.tune(B, trials=1, space=split_space, work_dir=str(tmp_path),
                  runner=LocalRunner(repeat=1))
    steps = [s.primitive for s in Trace.from_json(res.history[0].trace)]
    assert steps.count("sample_categorical") == 1 and steps[-1] == "split", steps


def test_without_decisions_that_reproduce_it_the_seed_is_auto_schedules_trace(monkeypatch):
    monkeypatch.setattr(tune_space, "auto_schedule_decisions",
                        lambda prog: [1, 0, 1, 2, 0, 0])       # tiles of 8
    prog = transpose_add()
    seed = auto_schedule_seed(prog)
    assert decisions_of(seed.trace) == []
    assert str(seed.trace) == str(pl.auto_schedule(prog).trace)
