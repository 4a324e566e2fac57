# SPDX-License-Identifier: Apache-2.0
"""pl.graph.tune: the distinct kernels of a model become tasks, each first measured with the
rules' schedule, then trials go where calls x best time is largest; the records feed
pl.graph.build(database=). The kernel tuner is replaced by a stand-in here (a real search
takes minutes), except in the one end-to-end run."""
from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.build import kernel_schedule
from polyloop.runtime.records import workload_key

graph_tune = importlib.import_module("polyloop.graph.tune")
build_module = importlib.import_module("polyloop.graph.build")


def _weights():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype("float32") for shape in ((40, 40), (40, 40),
                                                                        (40, 5))]


def _model():
    """Two equal dense layers, then a narrow one and a softmax."""
    w1, w3, w2 = _weights()
    b = pl.graph.GraphBuilder("m")
    x = b.input("x", (3, 40))

    def layer(v, w, name):
        return b.emit(Op.RELU, b.emit(Op.MATMUL, v, b.constant(w, name)))
    both = layer(layer(x, w1, "w1"), w3, "w3")
    small = b.emit(Op.MATMUL, both, b.constant(w2, "w2"))
    return b.build(b.emit(Op.SOFTMAX, small, axis=1))


def test_tasks_are_the_distinct_kernels_with_the_rules_schedules():
    g = _model()
    tasks = graph_tune.extract_tasks(g)
    kernels = [kc for kc in pl.graph.optimize(g).bindings if isinstance(kc, pl.graph.KernelCall)]
    keys = [workload_key(kernel_schedule(kc).original, "c") for kc in kernels]
    assert len(tasks) == len(set(keys)) == len(kernels) - 1      # the equal layers: one task
    assert sorted(t.calls for t in tasks) == [1] * (len(tasks) - 1) + [2]
    for t in tasks:
        kc = kernels[[k.kernel.name for k in kernels].index(t.name)]
        assert str(t.schedule) == str(kernel_schedule(kc))


def test_equal_layers_call_one_compiled_function():
    g = pl.graph.optimize(_model())
    units, segments = build_module._generate(g, None)
    functions = [step.function for step in segments[0].steps]
    assert len(functions) == 4 and functions[0] == functions[1] and len(set(functions)) == 3
    assert len(units) == 3
    x = np.random.default_rng(1).standard_normal((3, 40)).astype("float32")
    w1, w3, w2 = (w.astype("float64") for w in _weights())
    logits = np.maximum(np.maximum(x @ w1, 0) @ w3, 0) @ w2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    out = np.full((3, 5), np.nan, np.float32)
    pl.graph.build(_model(), winograd=False)(x, out=(out,))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


class _FakeTuner:
    """Stands in for TaskTuner: each round returns the task's made-up best seconds."""
    seconds: dict[str, float] = {}
    made: list = []

    def __init__(self, sch, db, build_, run_, *, seeds, model, auto_seeds, **options):
        assert seeds == [sch] and not auto_seeds     # the rules' schedule is measured first
        self.name = self.names[workload_key(sch.original, "c")]
        self.model = model
        self.rounds = []
        _FakeTuner.made.append(self)

    def run(self, trials, batch=None):
        self.rounds.append(trials)
        return self.seconds.get(self.name, 1e-6)


def test_trials_go_where_the_time_is_and_tasks_share_one_cost_model(monkeypatch, tmp_path):
    tasks = graph_tune.extract_tasks(_model())
    _FakeTuner.names = {workload_key(t.schedule.original, "c"): t.name for t in tasks}
    _FakeTuner.seconds = {tasks[0].name: 1e-3, tasks[-1].name: 1e-5}   # the first dominates
    _FakeTuner.made = []
    monkeypatch.setattr(graph_tune, "TaskTuner", _FakeTuner)
    monkeypatch.setattr(graph_tune, "measurers", lambda *a: (None, None))
    res = pl.graph.tune(_model(), trials=40, work_dir=str(tmp_path))
    assert sum(res.trials) == 40 and all(n >= 1 for n in res.trials)
    assert all(t.rounds[0] == 1 for t in _FakeTuner.made)          # one seed trial each
    assert len({id(t.model) for t in _FakeTuner.made}) == 1
    spent = dict(zip((t.name for t in res.tasks), res.trials))
    assert spent[tasks[0].name] > spent[tasks[-1].name]
    assert res.estimated_seconds == pytest.approx(sum(
        t.calls * _FakeTuner.seconds.get(t.name, 1e-6) for t in res.tasks))


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
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the database has a record of the kernel
        ex = pl.graph.build(g, database=str(tmp_path))
    ex(xv, out=(out,))
    np.testing.assert_allclose(out, np.tanh(np.maximum(xv, 0)), rtol=1e-6)
