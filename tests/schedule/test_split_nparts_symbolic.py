# SPDX-License-Identifier: Apache-2.0
"""``split(loop, nparts=k)`` on a loop of symbolic extent n: k blocks of ceil(n / k)
consecutive iterations, as TVM splits, each block one piece of a quasi-affine schedule."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.poly import affine

isl = pytest.importorskip("islpy", reason="islpy is a dependency of polyloop")


def _add():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    return A, B, pl.compute((n,), lambda i: A[i] + B[i], name="C")


@pytest.fixture(scope="module")
def blocked():
    A, B, C = _add()
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, nparts=4)
    sch.parallel(outer)
    return C, sch, pl.build(sch, target="c")


@pytest.mark.parametrize("size", [1, 3, 4, 5, 13, 37])
def test_blocks_cover_every_element_once(blocked, size, rng):
    _, _, mod = blocked
    a, b = (rng.standard_normal(size).astype("float32") for _ in range(2))
    c = np.full(size, np.nan, "float32")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_the_outer_loop_counts_blocks_and_the_trace_replays(blocked):
    C, sch, _ = blocked
    step = sch.trace.steps[-2]
    assert step.primitive == "split" and dict(step.kwargs) == {"nparts": 4}
    assert str(pl.Schedule.from_trace(C, sch.trace)) == str(sch)
    assert "for i_0 in parallel(4)" in str(sch) or "parallel" in str(sch)


def test_block_of_iterations_is_consecutive():
    """Block p holds iterations [p*c, (p+1)*c) with c = ceil(n / 4): the outer loop's value
    of iteration i is i // c (a cyclic split would give i % 4)."""
    A, B, C = _add()
    sch = pl.Schedule(C)
    (i,) = sch.get_loops(sch.get_block("C"))
    node = sch.state.loop(i.id)
    outer, inner = affine.block_parts(sch.state.program, node.exprs, 4)
    for n in (1, 5, 13, 16, 37):
        c = -(-n // 4)
        for it in range(n):
            p = isl.Map(str(outer[0])).fix_val(isl.dim_type.param, 0, isl.Val(n))
            q = isl.Map(str(inner[0])).fix_val(isl.dim_type.param, 0, isl.Val(n))
            point = isl.Set(f"{{ C[{it}] }}")
            assert _value(p.intersect_domain(point)) == it // c
            assert _value(q.intersect_domain(point)) == it % c


def _value(m) -> int:
    r = m.range()
    assert r.is_singleton()
    return r.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()


def test_reduction_rows_in_blocks(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    k = pl.reduce_axis((0, m), name="k")
    S = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S")
    sch = pl.Schedule(S)
    i = sch.get_loops(sch.get_block("S"))[0]
    outer, _ = sch.split(i, nparts=3)
    sch.parallel(outer)
    mod = pl.build(sch, target="c")
    for rows, cols in ((7, 5), (2, 3), (10, 1)):
        a = rng.standard_normal((rows, cols))
        s = np.full(rows, np.nan)
        mod(a, s)
        np.testing.assert_allclose(s, a.sum(1), rtol=1e-12)


def test_a_carried_dependence_still_refuses_parallel():
    n = pl.var("n")
    script = pl.script('''
def scan(A: pl.Buffer[("n",), "float64"]):
    for i in range(1, n):
        A[i] = A[i] + A[i - 1]
''')
    sch = pl.Schedule(script)
    (i,) = sch.get_loops(sch.get_block(sch.state.program.statements[0].name))
    outer, inner = sch.split(i, nparts=4)
    with pytest.raises(pl.ScheduleError, match="RAW"):
        sch.parallel(outer)
