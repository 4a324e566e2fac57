# SPDX-License-Identifier: Apache-2.0
"""The OpenCL target, run for real (PoCL on the CPU in CI): seed 000's kernels against NumPy.

Skipped only when no OpenCL platform is present, with the reason (how to install one) printed
by pytest's ``-ra`` summary.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available
from seed_kernels import tiled_matmul  # tests/ is on sys.path (rootdir conftest)

AVAILABLE, WHY = platform_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"OpenCL unavailable: {WHY}")


def double_kernel():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    return pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")


@pytest.mark.parametrize("n", [1, 127, 1000, 1025])
def test_seed_double_split_into_work_groups_of_128(rng, n):
    mod = pl.build(double_kernel(), target="opencl")
    assert "get_group_id(0)" in mod.source and "get_local_id(0)" in mod.source
    assert "barrier" not in mod.source
    a = rng.standard_normal(n, dtype="float32")
    np.testing.assert_array_equal(mod(a), 2 * a)
    out = np.full(n, np.nan, "float32")
    assert mod(a=a, out=out) is None
    np.testing.assert_array_equal(out, 2 * a)
    np.testing.assert_array_equal(mod(a=a, n=n), 2 * a)
    with pytest.raises(pl.ArgumentError, match="inconsistent size 'n'"):
        mod(a=a, n=n + 1)


def test_pyopencl_arrays_and_a_given_queue_are_used_directly(rng):
    import pyopencl as cl
    import pyopencl.array as cla
    queue = cl.CommandQueue(cl.create_some_context(interactive=False))
    mod = pl.build(double_kernel(), target="opencl", queue=queue)
    a = rng.standard_normal(300, dtype="float32")
    a_dev, out_dev = cla.to_device(queue, a), cla.empty(queue, 300, np.float32)
    mod(a_dev, out_dev)
    np.testing.assert_array_equal(out_dev.get(), 2 * a)
    np.testing.assert_array_equal(mod(a_dev), 2 * a)    # an output not given comes back
    with pytest.raises(pl.ArgumentError, match="must have dtype float32"):
        mod(a.astype("float64"))


def test_transpose_then_scale_runs_as_two_launches(rng):
    knl = pl.make_kernel("{ [i, j, ii, jj] : 0 <= i, j, ii, jj < n }", """
        out[j, i] = a[i, j]             {id=transpose}
        out[ii, jj] = 2*out[ii, jj]     {dep=transpose}
    """)
    for iname, axis in (("i", 1), ("j", 0), ("ii", 1), ("jj", 0)):
        knl = pl.split_iname(knl, iname, 8, outer_tag=f"g.{axis}", inner_tag=f"l.{axis}")
    mod = pl.build(knl, target="opencl")
    assert mod.source.count("__kernel ") == 2
    for n in (5, 37):
        a = rng.standard_normal((n, n), dtype="float32")
        np.testing.assert_array_equal(mod(a), 2 * a.T)


@pytest.mark.parametrize("n", [100, 256])
def test_matmul_16x16_work_groups_with_both_inputs_prefetched(rng, n):
    mod = pl.build(tiled_matmul(prefetch=True), target="opencl")
    src = mod.source
    assert "__local float a_fetch[16][16];" in src and "__local float b_fetch[16][16];" in src
    # one barrier after the copies, one before the next tile overwrites them: no more
    assert src.count("barrier(CLK_LOCAL_MEM_FENCE)") == 2
    a = rng.standard_normal((n, n), dtype="float32")
    b = rng.standard_normal((n, n), dtype="float32")
    np.testing.assert_allclose(mod(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_without_prefetch_needs_no_barrier(rng):
    mod = pl.build(tiled_matmul(prefetch=False), target="opencl")
    assert "barrier" not in mod.source and "__local" not in mod.source
    a = rng.standard_normal((33, 33), dtype="float32")
    b = rng.standard_normal((33, 33), dtype="float32")
    np.testing.assert_allclose(mod(a, b), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, size", [(3, 7), (16, 21)])
def test_depthwise_3x3_with_channels_on_work_groups(rng, channels, size):
    knl = pl.make_kernel(
        "{ [c, y, x, dy, dx] : 0 <= c < C and 0 <= y < H and 0 <= x < W and 0 <= dy, dx < 3 }",
        "out[c, y, x] = sum((dy, dx), inp[c, y + dy, x + dx] * w[c, dy, dx])")
    knl = pl.tag_inames(knl, {"c": "g.0"})
    knl = pl.split_iname(knl, "x", 8, inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    inp = rng.standard_normal((channels, size + 2, size + 2), dtype="float32")
    w = rng.standard_normal((channels, 3, 3), dtype="float32")
    expected = np.zeros((channels, size, size), "float32")
    for dy in range(3):
        for dx in range(3):
            expected += inp[:, dy:dy + size, dx:dx + size] * w[:, dy, dx][:, None, None]
    np.testing.assert_allclose(mod(inp, w), expected, rtol=1e-4, atol=1e-5)


def test_cholesky_like_seed_nest_runs_on_one_work_item(rng):
    # seed 000's Fortran nest S1-S6 (as in tests/frontend/test_kernel.py)
    knl = pl.make_kernel(["{ [i] : 0 <= i < n }", "{ [j] : 0 <= j < i }",
                          "{ [jj] : i + 1 <= jj < n }", "{ [k] : 0 <= k < i }"], """
        x = a[i, i]
        x = x - a[i, j]**2
        p[i] = 1.0 / sqrt(x)
        x = a[i, jj]
        x = x - a[jj, k] * a[i, k]
        a[jj, i] = x * p[i]
    """)
    mod = pl.build(knl, target="opencl")
    for n in (1, 9):
        m = rng.standard_normal((n, n))
        a_in = (m @ m.T + n * np.eye(n)).astype("float32")
        a = a_in.copy()
        p = mod(a)
        lower = np.linalg.cholesky(a_in.astype("float64"))
        np.testing.assert_allclose(np.tril(a, -1), np.tril(lower, -1), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(p, 1 / np.diag(lower), rtol=1e-4)


@pytest.mark.parametrize("rows", [1, 70])
def test_private_accumulator_lets_the_row_loop_run_on_work_items(rng, rows):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < m }", """
        <> acc = 0
        acc = acc + a[i, k] * x[k]
        y[i] = acc
    """)
    knl = pl.split_iname(knl, "i", 32, outer_tag="g.0", inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    assert "float acc;" in mod.source and "barrier" not in mod.source
    a = rng.standard_normal((rows, 9), dtype="float32")
    x = rng.standard_normal(9, dtype="float32")
    np.testing.assert_allclose(mod(a, x), a @ x, rtol=1e-5, atol=1e-5)


def test_a_temporary_used_by_two_launches_lives_in_global_scratch(rng):
    knl = pl.make_kernel("{ [i, i2] : 0 <= i, i2 < n }", """
        <> t[i] = a[i] * a[i]
        out[i2] = t[n - 1 - i2] + 1
    """)
    knl = pl.split_iname(knl, "i", 32, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "i2", 32, outer_tag="g.0", inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    assert "__global float *restrict t" in mod.source
    a = rng.standard_normal(70, dtype="float32")
    np.testing.assert_allclose(mod(a), (a * a)[::-1] + 1, rtol=1e-6)


def test_unbounded_work_item_loop_is_refused_with_a_hint():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    with pytest.raises(pl.ScheduleError, match="no constant extent.*split 'i' by a constant"):
        pl.tag_inames(knl, "i:l.0")


def test_schedule_bind_drives_work_groups_for_tensor_expressions(rng):
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.compute((n, n), lambda i, j: A[j, i] * 2.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    sch.reorder(io, jo, ii, ji)
    for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                       (ji, "threadIdx.x")):
        sch.bind(loop, axis)
    mod = pl.build(sch, target="opencl")
    a = rng.standard_normal((37, 37), dtype="float32")
    np.testing.assert_array_equal(mod(A=a), 2 * a.T)


def test_int_double_conditions_max_and_unrolling_match_numpy(rng):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < 4 }", """
        m[i] = max(k, a[i, k])
        if i % 2 == 0
            q[i] = b[i] // 3
        else
            q[i] = -b[i]
        end
        d[i] = c[i] * 2.5
    """, args=[pl.ArrayArg("a", "float32"), pl.ArrayArg("b", "int32"),
               pl.ArrayArg("c", "float64")])
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.tag_inames(knl, {"k": "unr"})
    mod = pl.build(knl, target="opencl")
    assert "#pragma unroll" in mod.source and "cl_khr_fp64" in mod.source
    n = 37
    a = rng.standard_normal((n, 4), dtype="float32")
    b = rng.integers(-50, 50, n, dtype="int32")
    c = rng.standard_normal(n)
    m, q, d = mod(a, b, c)
    np.testing.assert_array_equal(m, a.max(axis=1))
    np.testing.assert_array_equal(q, np.where(np.arange(n) % 2 == 0, b // 3, -b))
    np.testing.assert_allclose(d, c * 2.5)
