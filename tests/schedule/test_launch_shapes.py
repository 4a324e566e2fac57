# SPDX-License-Identifier: Apache-2.0
"""GPU launch shapes: a schedule with bound loops that no launch can run is refused by the
primitive that makes it (bind, or a later one), naming the loop, the rule and the fix; a
schedule that is accepted builds and computes what NumPy computes. Also the loop expressions
compute_at writes: functions of the iterators everywhere, so that a GPU launch's AST build
(which relaxes domains by what its guard knows) never finds a band undefined on some of them."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

from .programs import poisoned, refused_unchanged

OPENCL, WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")


def transpose_schedule():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((m, n), "float32", name="A")
    B = pl.compute((n, m), lambda i, j: A[j, i] * 2.0, name="B")
    sch = pl.Schedule(B)
    return sch, sch.get_loops(sch.get_block("B"))


def chain_schedule():
    """B = 2A + 1; C = |B|; D = max(C * A reversed, B) - 0.5 (three blocks, two temporaries)."""
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    B = pl.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = pl.compute((n, m), lambda i, j: pl.where(B[i, j] > 0.0, B[i, j], -B[i, j])
                   * A[i, m - 1 - j], name="C")
    D = pl.compute((n, m), lambda i, j: pl.maximum(C[i, j], B[i, j]) - 0.5, name="D")
    return pl.Schedule(D)


def chain_reference(a: np.ndarray) -> np.ndarray:
    b = a * 2 + 1
    return np.maximum(np.abs(b) * a[:, ::-1], b) - 0.5


def test_a_work_item_loop_of_symbolic_extent_is_refused_by_bind():
    sch, (i, j) = transpose_schedule()
    refused_unchanged(sch, lambda: sch.bind(j, "threadIdx.x"), "bind(j, 'threadIdx.x')",
                      "work-item loop 'j' (threadIdx.x) has no constant extent",
                      "split 'j' by a constant and bind the inner loop")


def test_a_work_group_loop_inside_a_sequential_loop_is_refused_by_bind():
    sch, (i, j) = transpose_schedule()
    refused_unchanged(sch, lambda: sch.bind(j, "blockIdx.x"),
                      "work-group loop 'j' (blockIdx.x) would run inside loop 'i'",
                      "bind 'i' to a work-group axis", "reorder so that 'j' is outermost")
    sch.bind(i, "blockIdx.y")       # outer first: then the inner one is a work-group loop too
    sch.bind(j, "blockIdx.x")


def test_a_work_item_loop_outside_the_work_groups_is_refused():
    sch, (i, j) = transpose_schedule()
    i0, i1 = sch.split(i, factors=[None, 4])
    sch.reorder(i1, i0)
    sch.bind(i1, "threadIdx.y")
    refused_unchanged(sch, lambda: sch.bind(i0, "blockIdx.x"),
                      "work-group loop 'i_0' (blockIdx.x) would run inside loop 'i_1'")


@pytest.mark.parametrize("outer, inner", [("blockIdx.x", "blockIdx.x"),
                                          ("threadIdx.x", "threadIdx.x")])
def test_two_nested_loops_on_one_gpu_index_are_refused(outer, inner):
    # once accepted, and the OpenCL kernel ran one loop's values for both: a wrong result
    sch, (i, j) = transpose_schedule()
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(i0, j0, i1, j1)
    first, second = (i0, j0) if outer.startswith("block") else (i1, j1)
    if outer.startswith("thread"):
        sch.bind(i0, "blockIdx.x")
        sch.bind(j0, "blockIdx.y")
    sch.bind(first, outer)
    refused_unchanged(sch, lambda: sch.bind(second, inner),
                      f"loop '{second.name}' would be bound to {inner}, which loop "
                      f"'{first.name}' around it already runs on")


def test_a_later_primitive_that_breaks_the_launch_shape_is_refused():
    sch = chain_schedule()
    sch.reverse_compute_inline(sch.get_block("D"))      # C's block now computes D
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.y")
    sch.bind(j, "blockIdx.x")
    # B inside 'i' would give 'i' two children: 'j' would no longer enclose the whole nest
    refused_unchanged(sch, lambda: sch.compute_at(sch.get_block("B"), i),
                      "compute_at(B, i) is refused",
                      "work-group loop 'j' (blockIdx.x) would run below loop 'i', which holds "
                      "several loops or statements")


def test_compute_at_writes_total_loop_expressions():
    sch = chain_schedule()
    sch.reverse_compute_inline(sch.get_block("D"))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    for node in (sch.state.loop(i.id), sch.state.loop(j.id)):
        assert ":" not in str(node.expr("B")), node.expr("B")   # no domain constraint in the map


@needs_opencl
@pytest.mark.parametrize("n, m", [(70, 5), (1, 3)])
def test_compute_at_then_bound_split_builds_on_opencl(n, m):
    # once refused by isl's AST build ("band node is not allowed to drop statement
    # instances"): compute_at wrote B's loop expressions only on B's domain, and the launch's
    # build, knowing 64 * i_0 + i_1 < n from its guard, dropped that bound from the domain
    sch = chain_schedule()
    sch.reverse_compute_inline(sch.get_block("D"))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    i0, i1 = sch.split(i, factors=[None, 64])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    mod = pl.build(sch, target="opencl")
    a = np.random.default_rng(n).uniform(-1, 1, (n, m)).astype("float32")
    out = poisoned((n, m))
    mod(a, out)
    np.testing.assert_allclose(out, chain_reference(a), rtol=1e-6, atol=1e-6)


@needs_opencl
def test_accepted_bound_transpose_builds_at_awkward_sizes():
    sch, (i, j) = transpose_schedule()
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(j0, i, j1)
    sch.bind(j0, "blockIdx.x")
    sch.bind(i, "blockIdx.y")
    sch.bind(j1, "threadIdx.x")
    mod = pl.build(sch, target="opencl")
    for n, m in ((5, 37), (1, 1)):
        a = np.random.default_rng(m).uniform(-1, 1, (m, n)).astype("float32")
        out = poisoned((n, m))
        mod(a, out)
        np.testing.assert_array_equal(out, a.T * 2)
