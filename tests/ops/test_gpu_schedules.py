# SPDX-License-Identifier: Apache-2.0
"""The GPU schedules of ``polyloop.ops``, proven on OpenCL (PoCL in CI) against NumPy at sizes
that do not divide the tiles, symbolic and fixed, every output poisoned first; their CUDA
sources compiled by nvcc (compile only: no GPU is needed)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

OPENCL, OPENCL_WHY = platform_available()
NVCC, NVCC_WHY = nvcc_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
needs_nvcc = pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
LADDER = list(ops.MATMUL_GPU_LADDER)


def depthwise_reference(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    h, w = data.shape[2:]
    padded = np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros_like(data)
    for r in range(3):
        for s in range(3):
            out += padded[:, :, r:r + h, s:s + w] * weight[None, :, 0, r, s, None, None]
    return out


@needs_opencl
@pytest.mark.parametrize("step", LADDER)
@pytest.mark.parametrize("fixed", [False, True], ids=["symbolic", "fixed"])
def test_matmul_ladder_matches_numpy_on_opencl(rng, step, fixed):
    m, n, k = 70, 84, 37        # no tile divides them
    sch = ops.MATMUL_GPU_LADDER[step](*((m, n, k) if fixed else (None,) * 3))
    mod = pl.build(sch, target="opencl")
    a = rng.standard_normal((m, k), dtype="float32")
    b = rng.standard_normal((k, n), dtype="float32")
    out = np.full((m, n), np.nan, "float32")
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_shared_tiles_are_local_memory_between_two_barriers():
    source = pl.build(ops.matmul_gpu_shared(), target="opencl").source
    assert "__local float a_fetch[64][16]" in source and "__local float b_fetch[16][64]" in source
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 2


@needs_opencl
@pytest.mark.parametrize("sizes", [None, (1, 5, 21, 19)], ids=["symbolic", "fixed"])
def test_depthwise_conv_matches_numpy_on_opencl(rng, sizes):
    n, c, h, w = sizes or (2, 3, 17, 33)
    mod = pl.build(ops.depthwise_conv2d_gpu(*(sizes or (None,) * 4)), target="opencl")
    data = rng.standard_normal((n, c, h, w), dtype="float32")
    weight = rng.standard_normal((c, 1, 3, 3), dtype="float32")
    out = np.full((n, c, h, w), np.nan, "float32")
    mod(data, weight, out)
    np.testing.assert_allclose(out, depthwise_reference(data, weight), rtol=1e-5, atol=1e-5)


@needs_nvcc
@pytest.mark.parametrize("step", LADDER)
def test_nvcc_compiles_the_cuda_matmul_ladder(step):
    mod = pl.build(ops.MATMUL_GPU_LADDER[step](128, 96, 64), target="cuda")
    assert ".entry matmul" in mod.ptx
    if step in ("float4", "thread_tile", "shared"):
        assert "const float4 b_" in mod.source      # b read 128 bits at a time
    if step == "shared":
        assert mod.source.count("__syncthreads();") == 2
        assert "*(float4 *)&b_fetch[" in mod.source  # the copy into shared memory is float4


@needs_nvcc
def test_nvcc_compiles_the_cuda_depthwise_conv():
    mod = pl.build(ops.depthwise_conv2d_gpu(1, 256, 21, 21), target="cuda")
    assert ".entry depthwise_conv2d" in mod.ptx
    assert "blockIdx.z" in mod.source and "__launch_bounds__(256)" in mod.source
