# SPDX-License-Identifier: Apache-2.0
"""compute_at(..., recompute=True): halos shared by parallel loops and GPU blocks are
computed again by each iteration instead of shared, so the loops stay parallel."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available


def _stencil_1d():
    n = pl.var("n")
    A = pl.placeholder((n + 2,), "float32", name="A")
    B = pl.compute((n + 2,), lambda i: A[i] * 2.0 + 1.0, name="B")
    C = pl.compute((n,), lambda i: B[i] + B[i + 1] * 3.0 + B[i + 2], name="C")
    return C


def _reference_1d(a):
    b = a * 2 + 1
    return b[:-2] + 3 * b[1:-1] + b[2:]


def test_plain_compute_at_shares_the_halo_and_is_refused_under_a_parallel_loop():
    sch = pl.Schedule(_stencil_1d())
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.parallel(io)
    with pytest.raises(pl.ScheduleError, match="compute_at"):
        sch.compute_at(sch.get_block("B"), io)


@pytest.mark.parametrize("n", [1, 7, 13])
def test_recompute_under_a_parallel_loop_matches_numpy(rng, n):
    sch = pl.Schedule(_stencil_1d())
    io, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.parallel(io)
    sch.compute_at(sch.get_block("B"), io, recompute=True)
    text = str(sch)
    assert text.index("for i_0 in parallel") < text.index("B[i_0, ") < text.index("C[")
    mod = pl.build(sch)
    assert "omp parallel for" in mod.source
    a = rng.standard_normal(n + 2).astype("float32")
    out = np.full(n, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _reference_1d(a), rtol=1e-5, atol=1e-5)


def test_the_recomputed_block_keeps_its_name_and_the_trace_replays(rng):
    sch = pl.Schedule(_stencil_1d())
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 3])
    sch.compute_at(sch.get_block("B"), io, recompute=True)
    assert [lp.name for lp in sch.get_loops(sch.get_block("B"))] == ["i_0", "B_dim_0"]
    again = pl.Schedule.from_trace(_stencil_1d(), sch.trace)
    assert str(again) == str(sch)
    a = rng.standard_normal(12).astype("float32")
    np.testing.assert_allclose(pl.build(again)(a), _reference_1d(a), rtol=1e-5, atol=1e-5)


def test_recompute_of_a_reduction_is_refused():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    B = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="B")
    C = pl.compute((n,), lambda i: B[i] * 2.0, name="C")
    sch = pl.Schedule(C)
    before = str(sch)
    with pytest.raises(pl.ScheduleError, match="without a reduction"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0], recompute=True)
    assert str(sch) == before


def test_recompute_with_a_reader_outside_the_loop_is_refused():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = pl.compute((n,), lambda i: B[i] * 2.0, name="C")
    D = pl.compute((n,), lambda i: B[i] + C[i], name="D")
    sch = pl.Schedule(D)
    with pytest.raises(pl.ScheduleError, match="also read by D outside loop 'i'"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0], recompute=True)
    with pytest.raises(pl.ScheduleError, match="recompute= is True or False"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0], recompute=1)


def _depthwise(batch, channels, size):
    """Seed 000's depthwise convolution (3x3, SAME padding) with the padding as a stage."""
    x = pl.placeholder((batch, channels, size, size), "float32", name="x")
    w = pl.placeholder((channels, 3, 3), "float32", name="w")
    pad = pl.compute((batch, channels, size + 2, size + 2), lambda b, c, i, j: pl.where(
        (i >= 1) & (i <= size) & (j >= 1) & (j <= size), x[b, c, i - 1, j - 1], 0.0),
        name="pad")
    di, dj = pl.reduce_axis((0, 3), name="di"), pl.reduce_axis((0, 3), name="dj")
    return pl.compute((batch, channels, size, size), lambda b, c, i, j: pl.sum(
        pad[b, c, i + di, j + dj] * w[c, di, dj], axis=[di, dj]), name="y")


def _depthwise_reference(x, w):
    b, c, s, _ = x.shape
    p = np.zeros((b, c, s + 2, s + 2), x.dtype)
    p[:, :, 1:-1, 1:-1] = x
    return sum(p[:, :, a:a + s, e:e + s] * w[None, :, a, e, None, None]
               for a in range(3) for e in range(3))


def _depthwise_schedule(batch, channels, size, gpu: bool):
    sch = pl.Schedule(_depthwise(batch, channels, size))
    y = sch.get_block("y")
    b, c, i, j, _, _ = sch.get_loops(y)
    io, ii = sch.split(i, factors=[None, 4])
    sch.reorder(b, c, io, ii, j)
    if gpu:
        sch.bind(b, "blockIdx.z")
        sch.bind(c, "blockIdx.y")
        sch.bind(io, "blockIdx.x")
        sch.bind(ii, "threadIdx.x")
    else:
        sch.parallel(b)
    sch.compute_at(sch.get_block("pad"), io, recompute=True)
    return sch


@pytest.mark.parametrize("batch, channels, size", [(2, 3, 9), (2, 1, 4)])
def test_depthwise_with_batch_2_recomputes_the_padded_rows_on_c(rng, batch, channels, size):
    mod = pl.build(_depthwise_schedule(batch, channels, size, gpu=False))
    x = rng.standard_normal((batch, channels, size, size)).astype("float32")
    w = rng.standard_normal((channels, 3, 3)).astype("float32")
    out = np.full((batch, channels, size, size), np.nan, "float32")
    mod(x, w, out)
    np.testing.assert_allclose(out, _depthwise_reference(x, w), rtol=1e-4, atol=1e-4)


OPENCL, WHY = platform_available()


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_depthwise_with_batch_2_on_opencl_blocks_recomputes_into_local_memory(rng):
    batch, channels, size = 2, 3, 10
    mod = pl.build(_depthwise_schedule(batch, channels, size, gpu=True), target="opencl")
    assert "__local float pad" in mod.source and "barrier(CLK_LOCAL_MEM_FENCE)" in mod.source
    x = rng.standard_normal((batch, channels, size, size)).astype("float32")
    w = rng.standard_normal((channels, 3, 3)).astype("float32")
    out = np.full((batch, channels, size, size), np.nan, "float32")
    mod(x, w, out)
    np.testing.assert_allclose(out, _depthwise_reference(x, w), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
@pytest.mark.parametrize("n", [5, 13])
def test_symbolic_2d_stencil_on_opencl_blocks(rng, n):
    m = pl.var("n")
    A = pl.placeholder((m + 2, m + 2), "float32", name="A")
    B = pl.compute((m + 2, m + 2), lambda i, j: A[i, j] * 2.0, name="B")
    di, dj = pl.reduce_axis((0, 3), name="di"), pl.reduce_axis((0, 3), name="dj")
    C = pl.compute((m, m), lambda i, j: pl.sum(B[i + di, j + dj], axis=[di, dj]), name="C")
    sch = pl.Schedule(C)
    i, j, _, _ = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factors=[None, 4])
    jo, ji = sch.split(j, factors=[None, 8])
    sch.reorder(io, jo, ii, ji)
    for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                       (ji, "threadIdx.x")):
        sch.bind(loop, axis)
    sch.compute_at(sch.get_block("B"), jo, recompute=True)
    mod = pl.build(sch, target="opencl")
    a = rng.standard_normal((n + 2, n + 2)).astype("float32")
    out = np.full((n, n), np.nan, "float32")
    mod(a, out)
    ref = sum(2 * a[x:x + n, y:y + n] for x in range(3) for y in range(3))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
