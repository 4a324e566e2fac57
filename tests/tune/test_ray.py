# SPDX-License-Identifier: Apache-2.0
"""runner="ray": builds and runs as tasks of a local 2-CPU Ray cluster (one test: starting Ray
takes seconds)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status

ray = pytest.importorskip("ray", reason="runner='ray' needs the extra: pip install polyloop[tune]")


def test_ray_runner_tunes_on_a_local_cluster(tmp_path):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        A = pl.placeholder((40, 24), "float32", name="A")
        B = pl.compute((40, 24), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
        res = pl.tune(B, trials=3, seed=0, runner="ray", work_dir=str(tmp_path))
    finally:
        ray.shutdown()
    assert [r.status for r in res.history].count(Status.OK) >= 1
    a = np.random.default_rng(0).standard_normal((40, 24)).astype("float32")
    out = np.full((40, 24), np.nan, "float32")
    res.build()(a, out)
    np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)
