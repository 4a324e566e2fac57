# SPDX-License-Identifier: Apache-2.0
"""pl.graph.tune: the distinct kernels of a model become tasks, each first measured with the
rules' schedule, then trials go where calls x best time is largest; the records feed
pl.graph.build(database=). The kernel tuner is replaced by a stand-in here (a real search
takes minutes), except in the one end-to-end run."""
from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.build import kernel_schedule
from polyloop.runtime.records import workload_key

graph_tune = importlib.import_module("polyloop.graph.tune")


def _model():
    rng = np.random.default_rng(0)
    b = pl.graph.GraphBuilder("m")
    x = b.input("x", (3, 24))
    big = b.emit(Op.RELU, b.emit(Op.MATMUL, x, b.constant(
        rng.standard_normal((24, 600)).astype("float32"), "w1")))
    small = b.emit(Op.MATMUL, big, b.constant(rng.standard_normal((600, 5)).astype("float32"),
                                              "w2"))
    return b.build(b.emit(Op.SOFTMAX, small, axis=1))


def test_tasks_are_the_optimized_kernels_with_the_rules_schedules():
    g = _model()
    tasks = graph_tune.extract_tasks(g)
    kernels = [kc for kc in pl.graph.optimize(g).bindings if isinstance(kc, pl.graph.KernelCall)]
    assert [t.name for t in tasks] == [kc.kernel.name for kc in kernels]
    assert all(t.calls == 1 for t in tasks)
    for t, kc in zip(tasks, kernels):
        assert str(t.schedule) == str(kernel_schedule(kc))


def test_trials_go_where_the_time_is(monkeypatch):
    seconds = {"m_k0_matmul": 1e-3, "m_k1_matmul": 1e-5}     # the first dominates
    calls = []

    def fake(sch, *, trials, seeds, **options):
        name = names[workload_key(sch.original, "c")]
        assert seeds == [sch]                      # the rules' schedule is measured first
        calls.append((name, trials))
        return SimpleNamespace(seconds=seconds.get(name, 1e-6))
    tasks = graph_tune.extract_tasks(_model())
    names = {workload_key(t.schedule.original, "c"): t.name for t in tasks}
    monkeypatch.setattr(graph_tune, "tune_kernel", fake)
    res = pl.graph.tune(_model(), trials=40, work_dir="unused")
    assert sum(res.trials) == 40 and all(n >= 1 for n in res.trials)
    assert calls[:len(tasks)] == [(t.name, 1) for t in tasks]      # one seed trial each
    spent = dict(zip((t.name for t in res.tasks), res.trials))
    assert spent["m_k0_matmul"] > spent["m_k1_matmul"]
    assert res.estimated_seconds == pytest.approx(sum(
        seconds.get(t.name, 1e-6) for t in res.tasks))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(pl.PolyloopError, match="trials must be a positive int"):
        pl.graph.tune(_model(), trials=0, work_dir="w")
    with pytest.raises(pl.PolyloopError, match="work_dir must name a directory"):
        pl.graph.tune(_model(), trials=1, work_dir="")
    with pytest.raises(pl.PolyloopError, match="seeds= takes schedules of the tuned program"):
        t0, t1 = graph_tune.extract_tasks(_model())[:2]
        pl.tune(t0.schedule, trials=1, seeds=[t1.schedule])


def test_a_tuned_model_builds_from_its_records_and_equals_the_untuned(tmp_path):
    b = pl.graph.GraphBuilder("t")
    x = b.input("x", ("n", 37))
    g = b.build(b.emit(Op.TANH, b.emit(Op.RELU, x)))
    res = pl.graph.tune(g, trials=2, work_dir=str(tmp_path), sizes={"n": 5})
    assert res.trials == (2,) and res.seconds[0] > 0
    xv = np.random.default_rng(3).standard_normal((7, 37)).astype("float32")
    out = np.full((7, 37), np.nan, np.float32)
    pl.graph.build(g, database=str(tmp_path))(xv, out=(out,))
    np.testing.assert_allclose(out, np.tanh(np.maximum(xv, 0)), rtol=1e-6)
