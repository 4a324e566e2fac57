# SPDX-License-Identifier: Apache-2.0
"""Cross-thread reductions (TVM's pattern): a reduction loop bound to work-items becomes a
work-group tree reduction in local memory, with barriers from the exact dependences."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.cuda import device_available
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()
NVCC, NVCC_WHY = nvcc_available()
DEVICE, DEVICE_WHY = device_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")


def _rowwise(reducer):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    return pl.compute((n,), lambda i: reducer(A[i, k], axis=k), name="B")


def _rfactor_schedule():
    """TVM's tutorial: split the reduce axis, rfactor the inner part, bind the partial and
    the final stage; the final stage's reduce axis goes to threadIdx.x."""
    sch = pl.Schedule(_rowwise(pl.sum))
    i, k = sch.get_loops(sch.get_block("B"))
    _, ki = sch.split(k, factors=[None, 24])
    rf = sch.rfactor(ki, 0)
    i_rf, _, k_rf = sch.get_loops(rf)
    sch.bind(i_rf, "blockIdx.x")
    sch.bind(k_rf, "threadIdx.x")
    i_b, r = sch.get_loops(sch.get_block("B"))
    sch.bind(i_b, "blockIdx.x")
    sch.bind(r, "threadIdx.x")
    return sch


def _direct_schedule(reducer, threads=16):
    sch = pl.Schedule(_rowwise(reducer))
    i, k = sch.get_loops(sch.get_block("B"))
    ko, ki = sch.split(k, factors=[None, threads])
    sch.reorder(i, ki, ko)
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
    return sch


def test_the_bound_reduction_is_a_tree_of_halving_steps():
    text = str(_rfactor_schedule())
    # 24 partial results, padded to 32: steps of 16, 8, 4, 2, 1 work-items
    for h in (16, 8, 4, 2):
        assert f"B_red[i, r] = B_red[i, r] + B_red[i, r + {h}]" in text
    assert "B_red[i, 0] = B_red[i, 0] + B_red[i, 1]" in text
    assert text.rstrip().endswith("B[i] += B_red[i, 0]")


@needs_opencl
@pytest.mark.parametrize("n, m", [(5, 100), (3, 7), (1, 1)])
def test_rfactor_then_bind_the_reduce_axis_on_opencl(rng, n, m):
    mod = pl.build(_rfactor_schedule(), target="opencl")
    assert "__local float B_red[24]" in mod.source
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in mod.source
    a = rng.standard_normal((n, m)).astype("float32")
    out = np.full(n, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)


@needs_opencl
@pytest.mark.parametrize("reducer, ref", [(pl.max, np.max), (pl.min, np.min), (pl.sum, np.sum)])
@pytest.mark.parametrize("m", [1, 15, 37])
def test_direct_binding_of_a_split_reduce_axis_on_opencl(rng, reducer, ref, m):
    mod = pl.build(_direct_schedule(reducer), target="opencl")
    a = rng.standard_normal((4, m)).astype("float32")
    out = np.full(4, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, ref(a, axis=1), rtol=1e-4, atol=1e-4)


def test_the_trace_replays_the_cross_thread_reduction():
    sch = _direct_schedule(pl.max)
    again = pl.Schedule.from_trace(_rowwise(pl.max), sch.trace)
    assert str(again) == str(sch)


@pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
def test_cuda_builds_the_tree_in_shared_memory_with_syncthreads():
    mod = pl.build(_direct_schedule(pl.sum, threads=32), target="cuda")
    assert "float B_red[32];" in mod.source and "__shared__" in mod.source
    assert "__syncthreads();" in mod.source
    assert ".entry" in mod.ptx
    if DEVICE:
        a = np.random.default_rng(0).standard_normal((6, 77)).astype("float32")
        np.testing.assert_allclose(mod(a), a.sum(axis=1), rtol=1e-4, atol=1e-4)


def test_a_reduction_loop_inside_its_own_outer_part_is_refused():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    B = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="B")
    sch = pl.Schedule(B)
    i, kk = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, factors=[None, 4])
    _, ki = sch.split(kk, factors=[None, 8])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    before = str(sch)
    with pytest.raises(pl.ScheduleError, match="loop 'k_0' around the reduction loop.*reorder"):
        sch.bind(ki, "threadIdx.x")
    assert str(sch) == before


def test_a_reduction_loop_on_work_groups_is_still_refused():
    sch = pl.Schedule(_rowwise(pl.sum))
    _, k = sch.get_loops(sch.get_block("B"))
    with pytest.raises(pl.ScheduleError, match="carries the RAW dependence B -> B"):
        sch.bind(k, "blockIdx.x")


def test_a_reduction_loop_of_symbolic_extent_is_refused_with_the_fix():
    sch = pl.Schedule(_rowwise(pl.sum))
    i, k = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(pl.ScheduleError, match="needs a constant extent; split the loop"):
        sch.bind(k, "threadIdx.x")


def _rows_schedule(reducer, rows=4, threads=8):
    """TVM's row-reduction layout: rows of the output on threadIdx.y, the split reduce axis
    on threadIdx.x, one tree reduction per row."""
    sch = pl.Schedule(_rowwise(reducer))
    i, k = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, factors=[None, rows])
    ko, ki = sch.split(k, factors=[None, threads])
    sch.reorder(io, ii, ki, ko)
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ki, "threadIdx.x")
    return sch


def test_a_row_loop_on_threadidx_y_gets_one_tree_per_row():
    text = str(_rows_schedule(pl.sum))
    assert "B_red[i_0, i_1, k_1] = B_red[i_0, i_1, k_1] + B_red[i_0, i_1, k_1 + 4]" in text
    assert text.count("bind(min(4, n - 4 * i_0), 'threadIdx.y')") >= 5   # one per phase


@needs_opencl
@pytest.mark.parametrize("reducer, ref", [(pl.sum, np.sum), (pl.max, np.max)])
@pytest.mark.parametrize("n, m", [(5, 13), (1, 1), (9, 37), (4, 8)])
def test_rows_on_threadidx_y_reduce_on_threadidx_x_on_opencl(rng, reducer, ref, n, m):
    mod = _rows_module(reducer)
    assert "__local float B_red[4][8]" in mod.source
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") >= 3
    a = rng.standard_normal((n, m)).astype("float32")
    out = np.full(n, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, ref(a, axis=1), rtol=1e-5, atol=1e-5)


_MODULES: dict = {}


def _rows_module(reducer):
    if reducer not in _MODULES:
        _MODULES[reducer] = pl.build(_rows_schedule(reducer), target="opencl")
    return _MODULES[reducer]


def test_the_reduction_cannot_take_the_axis_of_its_row_loop():
    sch = pl.Schedule(_rowwise(pl.sum))
    i, k = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, factors=[None, 4])
    ko, ki = sch.split(k, factors=[None, 8])
    sch.reorder(io, ii, ki, ko)
    sch.bind(ii, "threadIdx.x")
    with pytest.raises(pl.ScheduleError, match="bound to threadIdx.x already.*another"):
        sch.bind(ki, "threadIdx.x")


@pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
def test_cuda_builds_one_tree_per_threadidx_y_row():
    mod = pl.build(_rows_schedule(pl.sum, rows=2, threads=32), target="cuda")
    assert "B_red[2][32];" in mod.source and "__shared__" in mod.source
    assert mod.source.count("__syncthreads();") >= 5
    assert ".entry" in mod.ptx
    if DEVICE:
        a = np.random.default_rng(0).standard_normal((7, 77)).astype("float32")
        np.testing.assert_allclose(mod(a), a.sum(axis=1), rtol=1e-4, atol=1e-4)
