# SPDX-License-Identifier: Apache-2.0
"""The CUDA printer's text: what it spells differently from OpenCL, and its refusals."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.codegen.cuda import generate_cuda
from polyloop.lower.launches import lower_device
from polyloop.schedule.kernel import schedule_of
from seed_kernels import tiled_matmul  # tests/ is on sys.path (rootdir conftest)


def cuda_source(knl) -> str:
    sch = schedule_of(knl)
    return generate_cuda(lower_device(sch.program, sch.state.root))


def test_seed_tiled_matmul_in_cuda_spelling():
    source = cuda_source(tiled_matmul(True))
    assert 'extern "C" __global__ void __launch_bounds__(256) loopy_kernel(' in source
    assert "const float *__restrict__ a" in source and "float *__restrict__ c" in source
    assert "__shared__ __align__(32) float a_fetch[16][16];" in source
    assert "(long long)blockIdx.y" in source and "(long long)threadIdx.x" in source
    assert source.count("__syncthreads();") == 2       # where the barrier analysis put them
    assert "static __device__ __forceinline__ long long pl_floordiv_i64" in source
    assert "barrier(" not in source and "get_local_id" not in source and "__local" not in source


def test_no_barrier_where_no_dependence_crosses_threads():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    source = cuda_source(pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0"))
    assert "__syncthreads" not in source and "__launch_bounds__(128)" in source


def test_a_vectorized_loop_without_aligned_contiguous_loads_stays_scalar_with_the_reason():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    knl = pl.split_iname(knl, "i", 64, outer_tag="g.0")
    knl = pl.split_iname(knl, "i_inner", 4, outer_tag="l.0", inner_tag="vec")
    source = cuda_source(knl)       # n is symbolic: no alignment can be proven
    assert "const float4" not in source and "is unrolled, not float4" in source
    fixed = cuda_source(pl.fix_parameters(knl, n=256))
    assert "const float4 a_vec = *(const float4 *)&a[" in fixed
    assert "out[64 * i_outer + 4 * i_inner_outer + 3] = 2.0f * a_vec.w;" in fixed


def test_blocks_over_1024_threads_are_refused():
    knl = pl.make_kernel("{ [i, j] : 0 <= i, j < n }", "out[i, j] = a[i, j]")
    knl = pl.split_iname(knl, "i", 64, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 32, outer_tag="g.0", inner_tag="l.0")
    with pytest.raises(pl.BuildError, match=r"2048 threads; CUDA allows at most 1024"):
        cuda_source(knl)
