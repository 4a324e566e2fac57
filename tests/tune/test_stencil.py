# SPDX-License-Identifier: Apache-2.0
"""Tuning a time-iterated 2-d stencil with the polyhedral decisions of the generated space
(time tiling, wavefronts, unrolling): every candidate builds in the worker processes without
reaching the builder's time-out, and the tuned kernel equals NumPy; the builder's per-candidate
time-out on a build that hangs."""
from __future__ import annotations

import dataclasses
import stat

import numpy as np

import polyloop as pl
from polyloop import config
from polyloop.runtime.records import Status
from polyloop.schedule.trace import Trace
from polyloop.tune.measure import BuildJob, LocalBuilder, LocalRunner

from polybench_scripts import jacobi_2d  # tests/ is on sys.path (rootdir conftest)


def jacobi_numpy(a, b, tsteps):
    for _ in range(tsteps):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                               + a[:-2, 1:-1])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1]
                               + b[:-2, 1:-1])


def test_tuning_a_jacobi_2d_stencil_builds_every_candidate_and_matches_numpy(tmp_path, rng):
    builder = LocalBuilder(workers=2, timeout=60.0)
    res = pl.tune(jacobi_2d, trials=6, seed=11, sizes={"n": 23, "tsteps": 5},
                  work_dir=str(tmp_path), runner=LocalRunner(repeat=1), builder=builder,
                  batch=6)
    statuses = [r.status for r in res.history]
    assert Status.TIMEOUT not in statuses and Status.MISMATCH not in statuses, statuses
    assert statuses.count(Status.OK) >= 3, [r.error for r in res.history]
    n, tsteps = 29, 4           # other sizes than tuned: the kernel is for every n
    a, b = rng.standard_normal((n, n)), np.full((n, n), np.nan)
    b[0, :] = b[-1, :] = b[:, 0] = b[:, -1] = 0.0     # the border is not written
    a_ref, b_ref = a.copy(), b.copy()
    jacobi_numpy(a_ref, b_ref, tsteps)
    res.build()(a, b, np.zeros(tsteps), n=n, tsteps=tsteps)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12)
    np.testing.assert_allclose(b, b_ref, rtol=1e-12)


def scale(name):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    return pl.to_program(pl.compute((n,), lambda i: A[i] * 2.0, name=name))


def test_a_hanging_build_costs_one_time_out_and_the_others_build(tmp_path, monkeypatch):
    # a C compiler that hangs on the kernel named slow_* (its cache entry is named after it)
    cc = tmp_path / "cc"
    cc.write_text('#!/bin/sh\ncase "$*" in *slow_*) sleep 20;; esac\nexec gcc "$@"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(
        config.CONFIG, cc=str(cc), cache_dir=tmp_path / "cache"))
    trace = Trace().to_json()
    jobs = [BuildJob(scale("slow_B"), trace), BuildJob(scale("B"), trace),
            BuildJob(scale("C"), trace)]
    builder = LocalBuilder(workers=2, timeout=8.0)
    try:
        results = builder.build(jobs)
    finally:
        builder.close()
    assert [r.status for r in results] == [Status.TIMEOUT, Status.OK, Status.OK]
    assert "8 s" in results[0].error and results[0].kernel is None
    assert all(r.kernel is not None for r in results[1:])
