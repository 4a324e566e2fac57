# SPDX-License-Identifier: Apache-2.0
"""Preconditions instead of refusals: a program that indexes out of bounds only at some sizes
is built for the others (computed exactly by isl), and a call at an excluded size is refused
with the condition and the values; only a program no size can run is refused at build time.
The three front ends, the C size check and the three PolyBench kernels that needed it."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import polyloop as pl
from polyloop.poly.preconditions import preconditions

from polybench.kernels import correlation, durbin, fdtd_2d  # tests/ is on sys.path


# -- PolyBench as written -----------------------------------------------------------------------

def test_correlation_needs_one_column():
    mod = pl.build(pl.auto_schedule(pl.script(correlation)))
    assert mod.requires == ("m >= 1",)
    with pytest.raises(pl.ArgumentError, match=r"correlation\(\) needs m >= 1; got m = 0 from "
                       r"data.shape\[1\].*'corr_4' writes corr\[m - 1, m - 1\] out of bounds"):
        mod(data=np.ones((3, 0)), float_n=3.0)
    corr = mod(data=np.arange(6.0).reshape(3, 2) ** 2, float_n=3.0)[0]
    assert corr[1, 1] == 1.0 and np.isfinite(corr).all()


def test_durbin_needs_one_element():
    mod = pl.build(pl.auto_schedule(pl.script(durbin)))
    assert mod.requires == ("n >= 1",)
    with pytest.raises(pl.ArgumentError, match=r"needs n >= 1; got n = 0 .*y\[0\] out of bounds"):
        mod(np.ones(0), np.ones(0))
    y = np.full(1, np.nan)
    mod(np.array([0.5]), y)
    assert y[0] == -0.5


def test_fdtd_2d_needs_a_row_when_it_runs_at_all():
    mod = pl.build(pl.auto_schedule(pl.script(fdtd_2d)))
    assert mod.requires == ("nx >= 1 or tmax == 0 or ny == 0",)
    grids = [np.zeros((0, 4)) for _ in range(3)]
    with pytest.raises(pl.ArgumentError, match=r"needs nx >= 1 or tmax == 0 or ny == 0; got "
                       r"nx = 0 .*, ny = 4 .*, tmax = 2 .*'ey' writes ey\[0, j\] out of bounds"):
        mod(*grids, np.ones(2))
    mod(*grids, np.ones(0))                 # no time step: nothing is written, nothing refused
    mod(*[np.zeros((0, 0)) for _ in range(3)], np.ones(2))


def test_the_generated_c_checks_the_precondition_itself():
    mod = pl.build(pl.script(correlation))
    assert 'return "m >= 1";' in mod.source
    check = getattr(ctypes.CDLL(str(mod.library.path)), f"{mod.entry}_check_sizes")
    check.restype = ctypes.c_char_p
    params = (ctypes.c_int64 * 2)
    sizes = dict(zip(mod.params, range(len(mod.params))))
    bad, good = [0, 0], [0, 0]
    bad[sizes["n"]], good[sizes["n"]], good[sizes["m"]] = 3, 3, 2
    assert check(params(*bad)) == b"m >= 1" and check(params(*good)) is None


# -- the set of sizes, computed exactly ---------------------------------------------------------

@pl.script
def last(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[(1,), "float64"]):
    assert n >= 1  # noqa: F821
    B[0] = A[n]  # noqa: F821


def test_no_size_at_all_is_refused_at_build_and_says_so():
    with pytest.raises(pl.BuildError, match=r"'B' reads A\[n\] out of bounds: with n = 1 it "
                       r"reads A\[1\], and no size keeps every access of 'last' inside"):
        pl.build(last)


def test_a_statement_out_of_bounds_wherever_it_runs_is_refused_at_build():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i + 1], name="B")
    with pytest.raises(pl.BuildError, match=r"at every size at which 'B' runs"):
        pl.build(B)


def test_a_condition_on_several_sizes():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, 3), "float64", name="A")
    B = pl.compute((m, 3), lambda i, j: A[i, j] * 2.0, name="B")
    mod = pl.build(B)
    assert mod.requires == ("n >= m",)
    with pytest.raises(pl.ArgumentError, match=r"needs n >= m; got m = 5 .*, n = 4 "):
        mod(np.ones((4, 3)), np.zeros((5, 3)))
    a, b = np.arange(12.0).reshape(4, 3), np.full((2, 3), np.nan)
    mod(a, b)
    np.testing.assert_array_equal(b, 2 * a[:2])


@pytest.mark.parametrize("size", [0, 1, 5, 9])
def test_a_union_of_sizes_builds_and_runs(size, rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    B = pl.compute((n,), lambda i: A[(i * 7) % 5], name="B")
    mod = pl.build(B)
    assert mod.requires == ("n >= 5 or n <= 1",)       # not convex: two pieces
    a = rng.standard_normal(size)
    np.testing.assert_array_equal(mod(a), a[(np.arange(size) * 7) % 5])


@pytest.mark.parametrize("size", [2, 3, 4])
def test_a_union_of_sizes_refuses_the_gap(size):
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    mod = pl.build(pl.compute((n,), lambda i: A[(i * 7) % 5], name="B"))
    with pytest.raises(pl.ArgumentError, match=rf"needs n >= 5 or n <= 1; got n = {size}"):
        mod(np.ones(size))


def test_the_kernel_front_end_and_a_size_passed_by_name():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[i] + a[m]",
                         [pl.ArrayArg("a", "float64", shape=("n",)),
                          pl.ArrayArg("out", "float64", shape=("n",)), pl.ValueArg("m", "int64")])
    mod = pl.build(knl)
    assert mod.requires == ("n == 0 or m < n",)
    np.testing.assert_array_equal(mod(np.arange(4.0), m=3), np.arange(4.0) + 3)
    with pytest.raises(pl.ArgumentError, match=r"needs n == 0 or m < n; got m = 4 given as "
                       r"m=4, n = 4 from a.shape\[0\].*'insn' reads a\[m\] out of bounds"):
        mod(np.arange(4.0), m=4)


@pl.script
def tail(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
    assert n >= 2  # noqa: F821 - the size of A
    for i in range(n):  # noqa: F821
        B[i] = A[i]
    B[0] = A[n - 1]  # noqa: F821


def test_an_assumption_that_implies_the_precondition_is_all_that_is_required():
    assert preconditions(tail).requirements == ()
    assert pl.build(tail).requires == ("n >= 2",)


def test_check_builds_with_sizes_inside_the_precondition():
    mod = pl.build(pl.script(durbin), check=True)      # compared with the interpreter at n >= 1
    assert mod.requires == ("n >= 1",)
