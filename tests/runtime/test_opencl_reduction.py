# SPDX-License-Identifier: Apache-2.0
"""Reductions on the OpenCL target: one kernel per reduction, a private accumulator per
work-item (``acc = 0; for k: acc += ...; c[i, j] = acc``) as Loo.py writes it, with and without
``add_prefetch``; work-group guards that can never be false are left out, work-item guards of
partial tiles stay. Run for real (PoCL); skipped only without an OpenCL platform."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available
from seed_kernels import tiled_matmul  # tests/ is on sys.path (rootdir conftest)

AVAILABLE, WHY = platform_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"OpenCL unavailable: {WHY}")


@pytest.mark.parametrize("prefetch", [False, True])
def test_matmul_is_one_kernel_with_a_private_accumulator(rng, prefetch):
    mod = pl.build(tiled_matmul(prefetch), target="opencl")
    src = mod.source
    assert src.count("__kernel ") == 1
    # the accumulator is a private scalar, one per work-item
    assert "float acc_k;" in src and "__global float *restrict acc_k" not in src
    assert "acc_k[" not in src and "acc_k += " in src
    assert "c[(16 * i_outer + i_inner) * n + (16 * j_outer + j_inner)] = acc_k;" in src
    assert "// temporary acc_k (scope local) is one element per work-item" in src
    assert ("__local float a_fetch[16][16];" in src) == prefetch
    assert src.count("barrier(CLK_LOCAL_MEM_FENCE);") == (2 if prefetch else 0)
    # the grid is sized exactly: no guard on the work-group ids; partial tiles keep theirs,
    # as conditions on the ids (isl does not generate the work-group and work-item loops)
    assert "if (i_outer <" not in src and "if (j_outer <" not in src
    assert "const long i_inner = (long)get_local_id(1);" in src
    assert "if (16 * i_outer + i_inner < n && 16 * j_outer + j_inner < n)" in src
    assert "pl_min_i64(16, n - 16 * i_outer)" not in src
    for n in (1, 15, 17, 100):
        a = rng.standard_normal((n, n), dtype="float32")
        b = rng.standard_normal((n, n), dtype="float32")
        c = np.full((n, n), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_triangular_reduction_keeps_the_guards_it_needs(rng):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k <= i }", "s[i] = sum(k, a[i, k])")
    knl = pl.split_iname(knl, "i", 8, outer_tag="g.0", inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    assert mod.source.count("__kernel ") == 1 and "float acc_k;" in mod.source
    for n in (1, 7, 9):
        a = rng.standard_normal((n, n), dtype="float32")
        s = np.full(n, np.nan, "float32")
        mod(a, s)
        np.testing.assert_allclose(s, np.tril(a).sum(axis=1), rtol=1e-5, atol=1e-5)
