# SPDX-License-Identifier: Apache-2.0
"""Seed 000's depthwise convolution with a shared-memory tile (``depthwise_conv2d_gpu_shared``):
proven on OpenCL against NumPy at the goal's image sizes, an odd batch and shape, and symbolic
sizes, every output poisoned first; the copy is proven inside ``data`` by isl; the CUDA source
compiled by nvcc."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.poly.bounds import find_out_of_bounds
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

from .test_gpu_schedules import depthwise_reference

OPENCL, OPENCL_WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
NVCC, NVCC_WHY = nvcc_available()


def run(mod, rng, n, c, h, w) -> None:
    data = rng.standard_normal((n, c, h, w), dtype="float32")
    weight = rng.standard_normal((c, 1, 3, 3), dtype="float32")
    out = np.full((n, c, h, w), np.nan, "float32")
    mod(data, weight, out)
    np.testing.assert_allclose(out, depthwise_reference(data, weight), rtol=1e-5, atol=1e-5)


@needs_opencl
@pytest.mark.parametrize("shape", [(1, 8, 21, 21), (1, 4, 32, 32), (1, 2, 64, 64),
                                   (1, 2, 96, 96), (3, 5, 17, 33)])
def test_shared_tile_matches_numpy_on_opencl(rng, shape):
    mod = pl.build(ops.depthwise_conv2d_gpu_shared(*shape), target="opencl")
    assert "__local float data_fetch[18][18]" in mod.source
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 1
    run(mod, rng, *shape)


@needs_opencl
def test_shared_tile_with_symbolic_sizes_on_opencl(rng):
    mod = pl.build(ops.depthwise_conv2d_gpu_shared(2), target="opencl")
    for shape in [(2, 3, 17, 33), (2, 1, 1, 1), (2, 2, 16, 5)]:
        run(mod, rng, *shape)


def test_the_tile_copy_stays_inside_the_image():
    program = ops.depthwise_conv2d_gpu_shared(1).program
    assert find_out_of_bounds(program) is None


def test_a_symbolic_batch_is_refused_with_the_alternative():
    with pytest.raises(pl.ScheduleError, match="depthwise_conv2d_gpu takes a symbolic batch"):
        ops.depthwise_conv2d_gpu_shared(None)


@pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
def test_nvcc_compiles_the_shared_tile():
    mod = pl.build(ops.depthwise_conv2d_gpu_shared(1, 256, 96, 96), target="cuda")
    assert ".entry depthwise_conv2d" in mod.ptx
    assert "float data_fetch[18][18];" in mod.source and mod.source.count("__syncthreads();") == 1
