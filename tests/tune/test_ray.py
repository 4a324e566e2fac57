# SPDX-License-Identifier: Apache-2.0
"""runner="ray": builds and runs as tasks of a local 2-CPU Ray cluster (started once for the
module: starting Ray takes seconds)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.schedule.trace import Trace
from polyloop.tune.measure import BuildJob

ray = pytest.importorskip("ray", reason="runner='ray' needs the extra: pip install polyloop[tune]")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _scale() -> pl.Tensor:
    A = pl.placeholder((40, 24), "float32", name="A")
    return pl.compute((40, 24), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")


def test_ray_runner_tunes_on_a_local_cluster(tmp_path, cluster):
    res = pl.tune(_scale(), trials=3, seed=0, runner="ray", work_dir=str(tmp_path))
    assert [r.status for r in res.history].count(Status.OK) >= 1
    a = np.random.default_rng(0).standard_normal((40, 24)).astype("float32")
    out = np.full((40, 24), np.nan, "float32")
    res.build()(a, out)
    np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)


def test_a_ray_build_past_its_time_out_is_a_failure_and_the_next_builds_run(cluster):
    from polyloop.tune.ray_runner import RayMeasurer
    job = BuildJob(pl.to_program(_scale()), Trace().to_json())
    measurer = RayMeasurer(build_timeout=0.001)
    late = measurer.build([job, job, job])
    assert [r.status for r in late] == [Status.TIMEOUT] * 3
    assert "more than 0.001 s" in late[0].error
    measurer.build_timeout = 120.0
    (again,) = measurer.build([job])
    assert again.status is Status.OK and again.kernel is not None
