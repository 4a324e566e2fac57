# SPDX-License-Identifier: Apache-2.0
"""Loo.py spellings of the kernel language that a tutorial uses first."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def test_assume_then_fix_parameters_then_more_transformations(rng):
    knl = pl.make_kernel("{ [i]: 0<=i<n }", "out[i] = 2*a[i]")
    knl = pl.split_iname(knl, "i", 4)
    knl = pl.assume(knl, "n >= 1")
    knl = pl.fix_parameters(knl, n=18)
    assert knl.program.params == ()
    knl = pl.assume(knl, "0 = 0")        # a later step replays the earlier ones
    a = rng.standard_normal(18).astype("float32")
    out = np.full(18, np.nan, "float32")
    pl.build(knl)(a, out)
    np.testing.assert_array_equal(out, 2 * a)


def test_prioritize_loops_reorders_and_keeps_results(rng):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }",
                         "out[i, j] = a[i, j] * 2 + a[i, 0]")
    knl = pl.prioritize_loops(knl, "j,i")
    assert knl.loops().splitlines()[0] == "for j in range(m):"
    a = rng.standard_normal((5, 7)).astype("float32")
    out = np.full((5, 7), np.nan, "float32")
    pl.build(knl)(a, out)
    np.testing.assert_allclose(out, a * 2 + a[:, :1], rtol=1e-6)


def test_prioritize_loops_refuses_an_order_that_breaks_a_dependence():
    knl = pl.make_kernel("{ [i, j] : 1 <= i < n and 1 <= j < n }",
                         "a[i, j] = a[i - 1, j + 1] + 1")
    with pytest.raises(pl.ScheduleError):
        pl.prioritize_loops(knl, "j,i")


def test_set_temporary_address_space_survives_later_transformations(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }",
                         ["<> t = 2 * a[i]", "out[i] = t + 1"])
    knl = pl.split_iname(knl, "i", 4)
    knl = pl.set_temporary_address_space(knl, "t", "global")
    assert knl.program.buffer("t").scope is pl.MemScope.GLOBAL
    knl = pl.assume(knl, "n >= 1")
    a = rng.standard_normal(10).astype("float32")
    out = np.full(10, np.nan, "float32")
    pl.build(knl)(a, out)
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)
    with pytest.raises(pl.ScheduleError, match="not a temporary.*temporaries: t"):
        pl.set_temporary_address_space(knl, "a", "local")
    with pytest.raises(pl.ScheduleError, match="unknown space 'shared'"):
        pl.set_temporary_address_space(knl, "t", "shared")


def test_instructions_run_in_dependence_order_not_text_order(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", [
        "out[i] = t[i] + 1      {id=use, dep=make}",
        "t[i] = 2 * a[i]        {id=make}",
    ])
    assert [s.buffer for s in knl.program.statements] == ["t", "out"]
    a = rng.standard_normal(7).astype("float32")
    out, t = np.full(7, np.nan, "float32"), np.full(7, np.nan, "float32")
    pl.build(knl)(a=a, out=out, t=t)
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)


def test_a_cycle_of_deps_is_refused():
    with pytest.raises(pl.ParseError, match="form a cycle"):
        pl.make_kernel("{ [i] : 0 <= i < n }", ["a[i] = 1  {id=x, dep=y}",
                                                "b[i] = 2  {id=y, dep=x}"])


def test_split_iname_with_slabs_separates_full_tiles(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    knl = pl.split_iname(knl, "i", 16, slabs=(0, 1))
    knl = pl.assume(knl, "n >= 1")          # a replay keeps the slabs
    mod = pl.build(knl)
    assert "i_inner < 16; i_inner++" in mod.source     # the full tiles: a constant trip count
    a = rng.standard_normal(37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, 2 * a)
    with pytest.raises(pl.ScheduleError, match="slabs= is a pair"):
        pl.split_iname(knl, "i_inner", 4, slabs=1)
