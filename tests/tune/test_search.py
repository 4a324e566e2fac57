# SPDX-License-Identifier: Apache-2.0
"""The search loop with fake builders and runners: a tiny space searched to its known optimum,
crashing, hanging and wrong candidates recorded without stopping the search (the wrong one
never chosen), records resumed from the database and used by pl.build(database=)."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.compiler import compile_c
from polyloop.runtime.records import Database, Status, workload_key
from polyloop.schedule.sampling import decisions_of
from polyloop.schedule.trace import Trace
from polyloop.tune.tuner import CONFIRM
from polyloop.tune.measure import BuildResult, KernelSpec, LocalRunner, RunResult, build_one

N = 400


def scale(factor=2.0, n=N):
    A = pl.placeholder((n,), "float32", name="A")
    return pl.compute((n,), lambda i: A[i] * factor, name="B")


def grid_space(sch):
    """400 schedules: two drawn split factors."""
    (i,) = sch.get_loops("B")
    f1 = sch.sample_categorical(list(range(1, 21)))
    f2 = sch.sample_categorical(list(range(1, 21)))
    sch.split(i, factors=[None, f1, f2])


class CostBuilder:
    """Builds nothing: the 'kernel' is the trace's decisions."""

    def build(self, jobs):
        return [BuildResult(decisions_of(Trace.from_json(j.trace))) for j in jobs]


class CostRunner:
    """A known cost over the decisions: fastest at factors (13, 7)."""

    def set_inputs(self, inputs, sizes):
        pass

    def run(self, decisions, repeat=None):
        if not decisions:
            return RunResult(Status.OK, (1.0,), {})
        f1, f2 = decisions[0] + 1, decisions[1] + 1
        return RunResult(Status.OK, (1e-3 * (1 + abs(f1 - 13) + abs(f2 - 7)),), {})


@pytest.mark.parametrize("strategy", ["evolutionary", "random"])
def test_tiny_space_searched_to_its_optimum(tmp_path, strategy):
    res = pl.tune(scale(), trials=60, strategy=strategy, space=grid_space, seed=1,
                  work_dir=str(tmp_path), builder=CostBuilder(), runner=CostRunner(), batch=6)
    assert len(res.history) == 60
    if strategy == "evolutionary":
        assert res.seconds == pytest.approx(1e-3)
        assert decisions_of(res.trace) == [12, 6]
    else:
        assert res.seconds <= 4e-3


def test_resume_starts_from_the_best_and_build_uses_it(tmp_path):
    kw = dict(space=grid_space, builder=CostBuilder(), runner=CostRunner(), batch=5,
              work_dir=str(tmp_path))
    first = pl.tune(scale(), trials=20, seed=0, **kw)
    second = pl.tune(scale(), trials=10, seed=1, **kw)
    key = workload_key(pl.to_program(scale()), "c")
    records = Database(tmp_path).records(key)
    assert len({r.trace for r in records}) == 30          # no candidate proposed twice ...
    count, times = CONFIRM      # ... but each run's fastest are timed again at its end
    assert len(records) == 30 + 2 * count * times
    again = {r.trace for r in records if sum(q.trace == r.trace for q in records) > 1}
    assert count <= len(again) <= 2 * count
    assert second.seconds <= first.seconds
    mod = pl.build(scale(), database=str(tmp_path))
    assert mod.schedule.trace.to_json() == second.trace.to_json()
    a = np.random.default_rng(0).standard_normal(N).astype("float32")
    out = np.full(N, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2.0)


def test_build_without_records_warns_and_uses_the_given_schedule(tmp_path):
    with pytest.warns(RuntimeWarning, match="no successful record"):
        mod = pl.build(scale(), database=str(tmp_path))
    a = np.ones(N, "float32")
    np.testing.assert_allclose(mod(a), a * 2.0)


def outcome_space(sch):
    (i,) = sch.get_loops("B")
    kind = sch.sample_categorical(["ok", "crash", "hang", "wrong"])
    sch.split(i, factors=[None, 1 + ["ok", "crash", "hang", "wrong"].index(kind)])


class SabotagingBuilder:
    """Builds real kernels, then breaks the ones whose draw says so."""

    def build(self, jobs):
        out = []
        for job in jobs:
            built = build_one(job)
            kind = (decisions_of(Trace.from_json(job.trace)) or [0])[0]
            out.append(self._break(built.kernel, kind) if built.kernel else built)
        return out

    def _break(self, k, kind):
        if kind == 3:   # another computation with the same signature: B = A * 3
            k = build_one_wrong()
        elif kind in (1, 2):
            body = "*(volatile int *)0 = 1;" if kind == 1 else "for (volatile int z = 0;; z++) {}"
            head = k.source.index("{", k.source.index(f"int32_t {k.entry}(")) + 1
            src = k.source[:head] + "\n    " + body + k.source[head:]
            k = KernelSpec(compile_c(src, name=k.entry), k.entry, k.args, k.params, src)
        return BuildResult(k)


def build_one_wrong():
    mod = pl.build(scale(3.0))
    return KernelSpec(mod.library, mod.entry, mod.args, mod.params, mod.source)


def test_crash_hang_and_wrong_result_do_not_stop_the_search(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="polyloop.tune"):
        res = pl.tune(scale(), trials=4, strategy="random", space=outcome_space, seed=0,
                      work_dir=str(tmp_path), builder=SabotagingBuilder(),
                      runner=LocalRunner(timeout=3.0, repeat=1))
    status = {json.loads(r.trace)[1]["kwargs"]["decision"]: r.status for r in res.history}
    assert status == {0: Status.OK, 1: Status.RUN_ERROR, 2: Status.TIMEOUT, 3: Status.MISMATCH}
    assert decisions_of(res.trace) == [0]
    assert "WRONG RESULT" in caplog.text


def test_options_checked():
    with pytest.raises(pl.PolyloopError, match="strategy"):
        pl.tune(scale(), strategy="annealing")
    with pytest.raises(pl.PolyloopError, match="sizes="):
        pl.tune(scale(), sizes={"m": 3})
    with pytest.raises(pl.PolyloopError, match="target must be one of c, opencl, cuda"):
        pl.tune(scale(), target="vulkan")
    with pytest.raises(pl.PolyloopError, match="trials"):
        pl.tune(scale(), trials=0)


def test_a_build_past_its_time_out_is_a_failure_and_the_builder_recovers():
    from polyloop.tune.measure import BuildJob, LocalBuilder
    job = BuildJob(pl.to_program(scale()), Trace().to_json())
    builder = LocalBuilder(workers=1, timeout=0.001)
    try:
        assert [r.status for r in builder.build([job, job])] == [Status.TIMEOUT] * 2
        builder.timeout = 120.0
        (again,) = builder.build([job])
        assert again.status is Status.OK and again.kernel is not None
    finally:
        builder.close()
