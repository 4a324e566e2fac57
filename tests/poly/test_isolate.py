# SPDX-License-Identifier: Apache-2.0
"""Full-tile isolation: tiles that are full get a nest with constant bounds, partial tiles keep
the general one; results agree with NumPy at sizes around the tile and for symbolic sizes."""
from __future__ import annotations

import re

import islpy as isl
import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.cli.demo import matmul_relu
from polyloop.poly.isl_schedule import context
from polyloop.poly.isolate import isolation_plan
from polyloop.poly.tree import loops
from polyloop.schedule.auto_common import handle_of


def schedule_matmul_relu(D):
    """The demo's register-tile schedule with its tile fixed whatever the host: 6 x 64 in
    vectors of 16 lanes, B packed whole."""
    return ops.schedule_matmul_relu(D, lanes=16, pack_in_panel=False)


def _poisoned_call(mod, *args, shape):
    out = np.full(shape, np.nan, dtype="float32")
    mod(*args, out)
    return out


def _scaled(n, factor=6, kind="unroll"):
    """B[i] = 2 A[i] + 1 with i split by ``factor`` and the inner loop unrolled/vectorized."""
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = pl.Schedule(B)
    i0, i1 = sch.split(sch.get_loops("B")[0], factors=[None, factor])
    getattr(sch, kind)(i1)
    return sch, i0, i1


def _plan(sch):
    return isolation_plan(sch.program, sch.state.root, context(sch.program))


def test_demo_isolates_at_the_row_tile_loop_above_k():
    sch = schedule_matmul_relu(matmul_relu(pl.var("n")))
    plan = _plan(sch)
    names = {n.id: n.name for n in loops(sch.state.root)}
    assert [names[k] for k in plan] == ["i_0"]
    (full,) = plan.values()
    assert full.dim(isl.dim_type.set) == 2     # over (j_0, i_0)


@pytest.mark.parametrize("n", [1, 5, 6, 7, 13])
@pytest.mark.parametrize("kind", ["unroll", "vectorize"])
def test_split_numbers_symbolic(rng, n, kind):
    sch, _, _ = _scaled(pl.var("n"), 6 if kind == "unroll" else 16, kind)
    mod = pl.build(sch)
    m = n if kind == "unroll" else n + 10     # around 16 too: 11, 15, 16, 17, 23
    a = rng.random(m, dtype=np.float32)
    np.testing.assert_allclose(_poisoned_call(mod, a, shape=(m,)), a * 2 + 1, rtol=1e-6)


@pytest.fixture(scope="module")
def demo_any_n():
    return pl.build(schedule_matmul_relu(matmul_relu(pl.var("n"))))


def _check_demo(mod, n, rng):
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32) - 0.5
    got = _poisoned_call(mod, a, b, shape=(n, n))
    np.testing.assert_allclose(got, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [1, 5, 7, 63, 65, 71])
def test_demo_matmul_relu_symbolic_matches_numpy(rng, demo_any_n, n):
    _check_demo(demo_any_n, n, rng)


@pytest.mark.parametrize("n", [7, 71])
def test_demo_matmul_relu_constant_matches_numpy(rng, n):
    _check_demo(pl.build(schedule_matmul_relu(matmul_relu(n))), n, rng)


def test_register_tile_with_symbolic_n_has_a_constant_trip_full_tile_nest(demo_any_n):
    src = demo_any_n.source
    # the full tiles: constant-trip unrolled loops and whole vectors, no masks
    assert "for (int64_t i_1 = 0; i_1 < 6; i_1++)" in src
    assert "for (int64_t j_1 = 0; j_1 < 4; j_1++)" in src
    assert "no remainder" in src
    # the partial tiles keep isl's general nest
    assert re.search(r"i_1 < pl_min_i64\(6, n - 6 \* i_0\)", src)
    assert "masked remainder" in src


def test_printed_schedule_keeps_one_nest():
    sch, _, _ = _scaled(pl.var("n"))
    assert str(sch).count("for i_1 in") == 1


@pytest.mark.parametrize("n", [5, 12])
def test_nothing_to_isolate_when_all_or_no_tiles_are_full(n):
    sch, _, _ = _scaled(n)
    assert _plan(sch) == {}
    src = pl.build(sch).source
    assert src.count("for (int64_t i_1 ") == 1


def test_annotation_turns_isolation_off_and_on(rng):
    sch, _, i1 = _scaled(pl.var("n"))
    sch.annotate(i1, "isolate", "off")
    assert _plan(sch) == {}
    A = pl.placeholder((pl.var("n"),), "float32", name="A")
    B = pl.compute(A.shape, lambda i: A[i] + 1.0, name="B")
    serial = pl.Schedule(B)
    _, j1 = serial.split(serial.get_loops("B")[0], factors=[None, 4])
    assert _plan(serial) == {}
    serial.annotate(j1, "isolate", "on")
    assert len(_plan(serial)) == 1
    src = pl.build(serial).source
    assert "for (int64_t i_1 = 0; i_1 < 4; i_1++)" in src
    a = rng.random(7, dtype=np.float32)
    np.testing.assert_allclose(_poisoned_call(pl.build(serial), a, shape=(7,)), a + 1)


def test_opencl_tile_inside_work_items_is_isolated(rng):
    from polyloop.runtime.opencl import platform_available
    available, why = platform_available()
    if not available:
        pytest.skip(f"OpenCL unavailable: {why}")
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }", "out[i, j] = 2*a[i, j] + 1")
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "j", 4, inner_tag="unr")
    mod = pl.build(knl, target="opencl")
    assert "< 4; j_inner++)" in mod.source.replace("int ", "").replace("long ", "")
    for n, m in [(1, 1), (17, 3), (33, 9)]:
        a = rng.standard_normal((n, m), dtype="float32")
        out = np.full((n, m), np.nan, "float32")
        mod(a=a, out=out)
        np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)



@pl.script
def _jacobi_2d(A: pl.Buffer[("n", "n"), "float64"], B: pl.Buffer[("n", "n"), "float64"],
               T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def _jacobi_2d_numpy(a, b, tsteps):
    for _ in range(tsteps):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                               + a[:-2, 1:-1])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1]
                               + b[:-2, 1:-1])


def test_skewed_time_tiles_are_not_isolated_and_match_numpy(rng):
    # time tiles with a wavefront and an unrolled innermost loop: isl would spend minutes
    # isolating their full tiles (parallelograms in the original iterators)
    sch = pl.auto_schedule(_jacobi_2d, fusion="max", tile=8)   # rows and columns fused
    assert "skew" in str(sch.trace)
    (innermost,) = [n for n in loops(sch.state.root) if not n.children
                    or not isinstance(n.children[0], type(n))]
    sch.unroll(handle_of(innermost), 2)
    assert _plan(sch) == {}
    asked = sch.copy()
    asked.annotate(handle_of(innermost), "isolate", "on")   # a user's explicit request stands
    assert len(_plan(asked)) == 1
    n, tsteps = 21, 5
    a, b = rng.standard_normal((n, n)), np.full((n, n), np.nan)
    b[0, :] = b[-1, :] = b[:, 0] = b[:, -1] = 0.0     # the border is not written
    ra, rb = a.copy(), b.copy()
    _jacobi_2d_numpy(ra, rb, tsteps)
    pl.build(sch)(a, b, np.zeros(tsteps), n=n, tsteps=tsteps)
    np.testing.assert_allclose(a, ra, rtol=1e-12)
    np.testing.assert_allclose(b, rb, rtol=1e-12)
