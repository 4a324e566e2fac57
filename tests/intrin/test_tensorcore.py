# SPDX-License-Identifier: Apache-2.0
"""The tensor-core intrinsic (``wmma_intrin``): its C and OpenCL bodies compute the tile update
exactly as the loops they replace (checked against NumPy at sizes 16 does not divide, outputs
poisoned), its CUDA body is refused where the 32 lanes of a warp cannot make the call, and a
trace that tensorizes with it replays by name."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.intrin import wmma_intrin
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
OPENCL, OPENCL_WHY = platform_available()
NVCC, NVCC_WHY = nvcc_available()
NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _matmul(dtype: str, m, n, k):
    A = pl.placeholder((m, k), dtype, name="A")
    B = pl.placeholder((k, n), dtype, name="B")
    r = pl.reduce_axis((0, k), name="r")
    return pl.compute((m, n), lambda i, j: pl.sum(
        A[i, r].astype("float32") * B[r, j].astype("float32"), axis=r), name="C")


def _tiled(dtype: str, m, n, k, *, bind: bool) -> pl.Schedule:
    sch = pl.Schedule(_matmul(dtype, m, n, k))
    c = sch.get_block("C")
    i, j, r = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, 16])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, j1, r)
    sch.decompose_reduction(c, i1)
    sch.tensorize(i1, wmma_intrin(dtype))
    if bind:
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
    return sch


def _check(mod, rng, dtype, m, n, k):
    a = rng.standard_normal((m, k)).astype(NP[dtype])
    b = rng.standard_normal((k, n)).astype(NP[dtype])
    c = np.full((m, n), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_c_body_matches_numpy_with_partial_tiles(rng, dtype):
    m, n, k = pl.var("m"), pl.var("n"), pl.var("k")
    mod = pl.build(_tiled(dtype, m, n, k, bind=False), target="c")
    assert f"{wmma_intrin(dtype).name}(" in mod.source
    _check(mod, rng, dtype, 37, 50, 23)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
def test_opencl_body_on_global_operands(rng):
    mod = pl.build(_tiled("bfloat16", 40, 33, 19, bind=True), target="opencl")
    assert "pl_wmma_bf16_16x16x16_ggg(" in mod.source
    _check(mod, rng, "bfloat16", 40, 33, 19)


@pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
def test_cuda_refuses_a_call_without_a_warp_on_threadidx_x():
    with pytest.raises(pl.BuildError, match="exactly 32 threads on threadIdx.x"):
        pl.build(_tiled("float16", 32, 32, 16, bind=True), target="cuda")


def test_trace_replays_the_intrinsic_by_name():
    sch = _tiled("float16", 32, 32, 16, bind=False)
    again = pl.Schedule.from_trace(_matmul("float16", 32, 32, 16), sch.trace)
    assert str(again) == str(sch)


def test_only_16_bit_float_inputs():
    with pytest.raises(pl.ArgumentError, match="float16 or bfloat16"):
        wmma_intrin("float32")


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
def test_an_intrinsic_without_device_bodies_is_refused_on_gpu_targets():
    from polyloop.intrin import gemm_intrin
    A = pl.placeholder((8, 16), "float32", name="A")
    B = pl.placeholder((16, 8), "float32", name="B")
    r = pl.reduce_axis((0, 16), name="r")
    C = pl.compute((8, 8), lambda i, j: pl.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = pl.Schedule(C)
    i, j, rr = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    sch.reorder(i0, i1, j, rr)
    sch.decompose_reduction(sch.get_block("C"), i1)
    sch.tensorize(i1, gemm_intrin("portable", rows=4, cols=8))
    sch.bind(i0, "blockIdx.x")
    with pytest.raises(pl.BuildError, match="no opencl implementation"):
        pl.build(sch, target="opencl")
