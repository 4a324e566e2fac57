# SPDX-License-Identifier: Apache-2.0
"""pl.precompute: a substitution rule's values stored in a temporary over the footprint the
swept loops use (halo included), on C and on OpenCL (local memory and barriers)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()


def _stencil():
    return pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < n }", """
        u(x, y) := a[x, y] * 2 + 1
        out[i, j] = u(i, j) + u(i + 1, j) + u(i, j + 1) + u(i + 2, j + 2)
    """)


def _reference(a):
    n = a.shape[0] - 2
    u = a * 2 + 1
    return u[:n, :n] + u[1:n + 1, :n] + u[:n, 1:n + 1] + u[2:, 2:]


def _run(mod, n, rng):
    a = rng.standard_normal((n + 2, n + 2)).astype("float32")
    out = np.full((n, n), np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _reference(a), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 6, 11])
def test_precompute_over_a_tile_on_c_matches_numpy(rng, n):
    knl = pl.split_iname(_stencil(), "i", 4)
    knl = pl.split_iname(knl, "j", 3)
    knl = pl.prioritize_loops(knl, "i_outer,j_outer,i_inner,j_inner")
    knl = pl.precompute(knl, "u", ["i_inner", "j_inner"])
    loops = knl.loops()
    # once per tile, over the tile and its halo of 2 (the exact union of the four calls'
    # footprints), before the tile's loops
    assert "for u_dim_0 in range(min(6," in loops
    assert loops.index("u_0[") < loops.index("for i_inner")
    mod = pl.build(knl)
    assert "float u_0[6][5];" in mod.source       # one box, on the stack
    _run(mod, n, rng)


def test_precompute_without_sweep_stores_each_iteration_its_own_values(rng):
    knl = pl.precompute(_stencil(), "u", temporary_address_space="global")
    assert knl.schedule.program.buffer("u_0").scope is pl.MemScope.GLOBAL
    _run(pl.build(knl), 5, rng)


def test_precompute_is_replayed_by_later_transformations(rng):
    knl = pl.split_iname(_stencil(), "i", 4)
    knl = pl.precompute(knl, "u", ["i_inner", "j"], precompute_inames=["p", "q"])
    knl = pl.assume(knl, "n >= 1")
    assert "for p in range" in knl.loops() and "for q in range" in knl.loops()
    knl = pl.fix_parameters(knl, n=7)
    _run(pl.build(knl), 7, rng)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
@pytest.mark.parametrize("n", [3, 13])
def test_precompute_into_local_memory_on_opencl(rng, n):
    knl = pl.split_iname(_stencil(), "i", 4, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 8, outer_tag="g.0", inner_tag="l.0")
    knl = pl.precompute(knl, "u", ["i_inner", "j_inner"])
    mod = pl.build(knl, target="opencl")
    assert "__local float u_0[6][10]" in mod.source
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in mod.source
    assert "get_local_id" in mod.source.split("barrier")[0]   # the copy is spread over items
    _run(mod, n, rng)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_precompute_private_per_work_item_on_opencl(rng):
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < 3 }", """
        w(x) := a[x] * a[x]
        out[i] = sum(k, w(i + k))
    """)
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.precompute(knl, "w", ["k"])
    mod = pl.build(knl, target="opencl")
    assert "__local" not in mod.source
    a = rng.standard_normal(21).astype("float32")
    out = np.full(19, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, sum((a * a)[k:k + 19] for k in range(3)), rtol=1e-5)


def test_precompute_refusals_name_the_rule_and_the_fix():
    knl = _stencil()
    with pytest.raises(pl.ScheduleError, match="no substitution rule 'v'; its rules: u"):
        pl.precompute(knl, "v")
    with pytest.raises(pl.ScheduleError, match="k are not loops around 'insn'"):
        pl.precompute(knl, "u", ["k"])
    with pytest.raises(pl.ScheduleError, match="unknown temporary_address_space 'shared'"):
        pl.precompute(knl, "u", ["j"], temporary_address_space="shared")
    two = pl.make_kernel("{ [i] : 0 <= i < n }",
                         ["f(x) := a[x] + 1", "b[i] = f(i)", "c[i] = f(i) * 2"])
    with pytest.raises(pl.ScheduleError, match="called by insn, insn_1"):
        pl.precompute(two, "f")
    data = pl.make_kernel("{ [i] : 0 <= i < n }", ["f(x) := a[x] + 1", "b[i] = f(c[i])"],
                          args=[pl.ArrayArg("c", "int32", shape=("n",)),
                                pl.ArrayArg("a", "float32", shape=("m",)), ...])
    with pytest.raises(pl.ScheduleError, match="called with argument c\\[i\\]"):
        pl.precompute(data, "f")


def test_precompute_refuses_a_rule_whose_input_the_nest_writes():
    knl = pl.make_kernel("{ [i] : 1 <= i < n }", ["f(x) := a[x] * 2", "a[i] = f(i - 1)"])
    with pytest.raises(pl.ScheduleError, match="insn write 'a' in the loop nest"):
        pl.precompute(knl, "f")
