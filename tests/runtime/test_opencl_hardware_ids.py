# SPDX-License-Identifier: Apache-2.0
"""Work-group and work-item loops are hardware axes: isl does not generate them. The kernel body
is the code of one (group id, local id) point: each id is declared once, and the guards that
partial tiles need are conditions on the ids. Run for real (PoCL) against NumPy at sizes that do
not divide the tiles; skipped only without an OpenCL platform."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import BinOpKind, Const, Var, binop
from polyloop.ir.loops import Block, For, If, LoopKind, Store
from polyloop.ir.thread_axis import ThreadAxis
from polyloop.lower.launches import BARRIER_BUFFER, _barriers_uniform
from polyloop.runtime.opencl import platform_available
from seed_kernels import tiled_matmul  # tests/ is on sys.path (rootdir conftest)

AVAILABLE, WHY = platform_available()
needs_opencl = pytest.mark.skipif(not AVAILABLE, reason=f"OpenCL unavailable: {WHY}")
SIZES = [1, 15, 17, 100]


def _kernel_text(src: str) -> str:
    return src[src.index("__kernel"):]


@needs_opencl
@pytest.mark.parametrize("n", SIZES)
def test_partial_tiles_are_conditions_on_the_ids(rng, n):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    mod = pl.build(pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0"),
                   target="opencl")
    src = _kernel_text(mod.source)
    assert "const long i_outer = (long)get_group_id(0);" in src
    assert "const long i_inner = (long)get_local_id(0);" in src
    assert "if (16 * i_outer + i_inner < n)" in src and "for (" not in src
    a = rng.standard_normal(n, dtype="float32")
    out = np.full(n, np.nan, "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, 2 * a)


@needs_opencl
def test_barriers_stay_in_the_sequential_loop_every_work_item_runs(rng):
    mod = pl.build(tiled_matmul(prefetch=True), target="opencl")
    lines = _kernel_text(mod.source).splitlines()
    # one declaration per id, although the nest is split in three around the prefetches
    assert sum("const long i_inner = (long)get_local_id(1);" in x for x in lines) == 1
    assert not any("for (long i_inner" in x or "for (long b_dim_0" in x for x in lines)
    # the copies keep their own names, and their guards
    assert any("if (16 * j_outer + b_dim_1 < n && b_dim_0 + 16 * k_outer < n)" in x
               for x in lines)
    # both barriers are statements of the k_outer loop's body, under no condition
    depth = [len(x) - len(x.lstrip()) for x in lines if "barrier(" in x]
    copy = next(len(x) - len(x.lstrip()) for x in lines if "b_fetch[b_dim_0]" in x and "if" in
                lines[lines.index(x) - 1])
    assert len(depth) == 2 and all(d == copy - 4 for d in depth)
    for n in SIZES:
        a = rng.standard_normal((n, n), dtype="float32")
        b = rng.standard_normal((n, n), dtype="float32")
        c = np.full((n, n), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_triangular_domain_on_work_groups_and_work_items(rng):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < i }", "b[i, j] = 2*a[i, j]",
                         args=[pl.ArrayArg("a", "float32", shape=("n", "n")),
                               pl.ArrayArg("b", "float32", shape=("n", "n")),
                               pl.ValueArg("n", "int32")])
    knl = pl.split_iname(pl.tag_inames(knl, {"i": "g.0"}), "j", 16, inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    # row 0 has no element: work-group 0 runs row 1
    assert "const long i = 1 + (long)get_group_id(0);" in mod.source
    for n in SIZES:
        a = rng.standard_normal((n, n), dtype="float32")
        b = np.full((n, n), np.nan, "float32")
        mod(a, b)
        low = np.tri(n, k=-1, dtype=bool)
        np.testing.assert_array_equal(b[low], 2 * a[low])


@needs_opencl
def test_work_item_loop_inside_a_sequential_loop_of_the_seed_triangular_nest(rng):
    # seed 000's S1-S6 (tests/frontend/test_kernel.py) with the jj loop on work-items, inside
    # the sequential i loop: barriers order p[i] and the column updates between iterations
    knl = pl.make_kernel(["{ [i] : 0 <= i < n }", "{ [j] : 0 <= j < i }",
                          "{ [jj] : i + 1 <= jj < n }", "{ [k] : 0 <= k < i }"], """
        x = a[i, i]
        x = x - a[i, j]**2
        p[i] = 1.0 / sqrt(x)
        <> y = a[i, jj]
        y = y - a[jj, k] * a[i, k]
        a[jj, i] = y * p[i]
    """)
    mod = pl.build(pl.split_iname(knl, "jj", 8, inner_tag="l.0"), target="opencl")
    src = _kernel_text(mod.source)
    assert src.index("get_local_id(0)") < src.index("for (long i = 0")
    assert src.count("barrier(") == 2
    for n in SIZES:
        m = rng.standard_normal((n, n))
        a_in = (m @ m.T + n * np.eye(n)).astype("float32")
        a = a_in.copy()
        p = mod(a)
        lower = np.linalg.cholesky(a_in.astype("float64"))
        np.testing.assert_allclose(np.tril(a, -1), np.tril(lower, -1), rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose(p, 1 / np.diag(lower), rtol=1e-3)


@needs_opencl
def test_two_launches_with_their_own_ids(rng):
    knl = pl.make_kernel("{ [i, i2] : 0 <= i, i2 < n }", """
        <> t[i] = a[i] * a[i]
        out[i2] = t[n - 1 - i2] + 1
    """)
    knl = pl.split_iname(knl, "i", 32, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "i2", 8, outer_tag="g.0", inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    src = mod.source
    assert src.count("__kernel ") == 2
    assert "if (32 * i_outer + i_inner < n)" in src and "if (8 * i2_outer + i2_inner < n)" in src
    for n in SIZES:
        a = rng.standard_normal(n, dtype="float32")
        out = np.full(n, np.nan, "float32")
        mod(a, out)
        np.testing.assert_allclose(out, (a * a)[::-1] + 1, rtol=1e-6)


def test_a_barrier_under_a_condition_on_a_work_item_id_is_caught():
    i, zero, sixteen = Var("i"), Const(0, DType.INT64), Const(16, DType.INT64)
    barrier = Store(BARRIER_BUFFER, (), Const(True, DType.BOOL), None, "__barrier_l0")
    cond = binop(BinOpKind.LT, i, Var("n"))
    items = For("i", zero, sixteen, Block((If(cond, barrier, None),)), LoopKind.THREAD,
                thread=ThreadAxis.THREAD_X)
    groups = For("g", zero, sixteen, Block((If(cond, barrier, None),)), LoopKind.THREAD,
                 thread=ThreadAxis.BLOCK_X)
    assert not _barriers_uniform(items)
    assert _barriers_uniform(groups)          # a condition on a work-group id is uniform
