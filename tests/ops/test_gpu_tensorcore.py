# SPDX-License-Identifier: Apache-2.0
"""The tensor-core matmul (``ops.matmul_tensorcore``): float16 and bfloat16 inputs, float32
sums. On OpenCL (PoCL) the intrinsic is plain loops, so the schedule's index mapping, tiling,
shared-memory staging, barriers and partial-tile paths are checked against NumPy at sizes that
16 does not divide, symbolic and fixed, every output poisoned first; the CUDA source (WMMA
fragments) is compiled by nvcc for sm_80 and sm_90 (compile only: no GPU is needed)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.runtime.cuda_compiler import compile_cuda, nvcc_available
from polyloop.runtime.opencl import platform_available

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
OPENCL, OPENCL_WHY = platform_available()
NVCC, NVCC_WHY = nvcc_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
needs_nvcc = pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _check(mod, rng, dtype, m, n, k):
    a = rng.standard_normal((m, k)).astype(NP[dtype])
    b = rng.standard_normal((k, n)).astype(NP[dtype])
    c = np.full((m, n), np.nan, np.float32)
    mod(a, b, c)
    # the products of 16-bit floats are exact in float32: only the order of the sums differs
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-4)


@needs_opencl
def test_float16_fixed_sizes_on_opencl(rng):
    # rows 32..39 and columns 32..35 are partial tiles; K is one short step of k
    mod = pl.build(ops.matmul_tensorcore(40, 36, 21, dtype="float16"), target="opencl")
    assert "pl_wmma_f16_16x16x16_lll(" in mod.source      # the operands are in local memory
    # after the zeroing and the copies, before the copy out; one step of k: no barrier before
    # a next copy (there is none)
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 3
    # the partial tiles' register copies run on work-item 0 only, like their statement
    copy = mod.source.index("acc_k_reg[0] = acc_k[")
    assert "get_local_id(0)" in mod.source[copy - 200:copy]
    _check(mod, rng, "float16", 40, 36, 21)


@needs_opencl
def test_bfloat16_symbolic_sizes_on_opencl(rng):
    mod = pl.build(ops.matmul_tensorcore(dtype="bfloat16"), target="opencl")
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 4   # and around the sums
    for m, n, k in ((70, 84, 37), (64, 32, 64), (15, 17, 3)):   # full tiles, tiny edges
        _check(mod, rng, "bfloat16", m, n, k)


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_source_uses_tensor_cores_and_compiles_for_sm80_and_sm90(dtype):
    mod = pl.build(ops.matmul_tensorcore(dtype=dtype), target="cuda")
    assert "#include <mma.h>" in mod.source and "wmma::mma_sync" in mod.source
    # the call is made by all 32 lanes: no threadIdx.x guard right before it
    call = mod.source.index(f"{ops.gpu_tensorcore.INTRINSICS[dtype]}(&acc_k")
    assert "32 lanes of the warp make this call" in mod.source[call - 200:call]
    assert "mma.sync" in mod.ptx or "wmma.mma" in mod.ptx
    sm90 = compile_cuda(mod.source, name="matmul_tc_sm90", arch="compute_90")
    assert "mma" in sm90.text


def test_only_float16_and_bfloat16_inputs():
    with pytest.raises(pl.ArgumentError, match="float16 or bfloat16"):
        ops.matmul_tensorcore(dtype="float32")
