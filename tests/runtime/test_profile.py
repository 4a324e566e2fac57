# SPDX-License-Identifier: Apache-2.0
"""``pl.build(..., profile=...)``: per-nest timers. Results equal NumPy with and without them,
every top-level nest is listed with one run per call, the work of each nest is counted exactly
(flops from the domains, distinct bytes), and profile=False emits no timer code. No timing
assertions."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.bench.workloads import QUICK, select
from polyloop.errors import PolyloopError


def matmul_relu_schedule(n_sym: bool):
    n = pl.var("n") if n_sym else 37
    m = pl.var("m") if n_sym else 45
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, m), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, m), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    sch = pl.Schedule(D)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, kk, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    return sch


@pytest.mark.parametrize("sizes, depth", [((1, 1), True), ((15, 17), 3), ((17, 15), True),
                                          ((37, 45), 3)])
def test_profiled_module_equals_numpy_and_counts_calls(sizes, depth):
    n, m = sizes
    sch = matmul_relu_schedule(n_sym=True)
    mod = pl.build(sch, profile=depth)
    rng = np.random.default_rng(n * 100 + m)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, m)).astype("float32")
    want = np.maximum(a.astype(np.float64) @ b, 0)
    mod.profile(reset=True)   # modules of the same source share one loaded library's counters
    calls = 3
    for _ in range(calls):
        out = np.full((n, m), np.nan, np.float32)
        mod(a, b, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    prof = mod.profile()
    top = [r for r in prof.rows if r.depth == 1]
    # the initialisation runs in the update's loops (init fusion): one nest for both
    assert prof.calls == calls and len(top) == 2 and all(r.runs == calls for r in top)
    update, relu = top
    assert relu.label == "D [i, j]"
    assert update.label.startswith("C_init/C [i parallel")  # isolation may split below i
    assert update.flops == calls * 2.0 * n * n * m
    assert relu.flops == calls * n * m
    # D reads C and writes D once: 2 * 4 bytes an element
    assert relu.bytes == calls * 8.0 * n * m
    assert prof.sizes == {"n": n, "m": m}
    text = str(prof)
    assert "C_init/C [i parallel" in text and "GFLOP/s" in text
    mod.profile(reset=True)
    assert mod.profile().calls == 0


def test_benchmark_calls_are_counted_and_reset():
    sch = matmul_relu_schedule(n_sym=False)
    mod = pl.build(sch, profile=True)
    a = np.ones((37, 37), "float32")
    b = np.ones((37, 45), "float32")
    out = np.empty((37, 45), "float32")
    mod.profile(reset=True)
    mod.benchmark(a, b, out, repeat=2, warmup=1, min_time=0)
    prof = mod.profile(reset=True)
    assert prof.calls >= 3 and all(r.runs == prof.calls for r in prof.rows if r.depth == 1)
    assert mod.profile().calls == 0


def test_profile_false_emits_no_timer_code():
    plain = pl.build(matmul_relu_schedule(n_sym=False))
    assert "pl_prof" not in plain.source and "profile" not in plain.source
    with pytest.raises(PolyloopError, match="built without profiling"):
        plain.profile()
    timed = pl.build(matmul_relu_schedule(n_sym=False), profile=True)
    assert "pl_profile_read" in timed.source


def test_bad_profile_option_is_a_clear_error():
    with pytest.raises(PolyloopError, match="profile=-1"):
        pl.build(matmul_relu_schedule(n_sym=False), profile=-1)


@pytest.mark.parametrize("key", [w.key for w in QUICK])
def test_operator_schedules_profiled_equal_numpy(key):
    """The benchmark's schedules (packing, tensorize, register tiles) with timers three levels
    deep still compute NumPy's result."""
    w = select([key], QUICK)[0]
    if w.make is None:
        pytest.skip("no schedule")
    mod = w.make(profile=3)
    inputs = w.inputs(np.random.default_rng(7))
    want = w.reference(*inputs)
    out = np.full(want.shape, np.nan, np.float32)
    mod.profile(reset=True)
    mod(*inputs, out)
    np.testing.assert_allclose(out, want, rtol=w.rtol, atol=w.atol)
    prof = mod.profile()
    assert prof.calls == 1 and all(r.runs == 1 for r in prof.rows if r.depth == 1)
