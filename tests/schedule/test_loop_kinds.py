# SPDX-License-Identifier: Apache-2.0
"""Loop kinds: ``parallel``, ``vectorize``, ``unroll``, ``bind`` and ``annotate``. A parallel,
vector or GPU-bound loop must carry no dependence; a reduction loop only through rfactor."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var, VarKind
from polyloop.ir.program import Buffer, BufferRole, Program, Statement

from .programs import (check_matmul_relu, lines, matmul_sch, poisoned, raises_schedule_error,
                       refused_unchanged)


def test_parallel_outer_loop_prints_and_emits_openmp(rng):
    sch, (i, j, k) = matmul_sch()
    sch.parallel(i)
    text = lines(sch)
    assert "for i in parallel(n):" in text
    assert text.count("for i in parallel(n):") == 1     # only C's update nest
    assert "#pragma omp parallel for" in pl.build(sch).source
    check_matmul_relu(sch, rng)


def test_parallel_of_a_reduction_loop_is_refused_with_an_rfactor_hint():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.parallel(k), "cannot parallelize loop 'k'",
                      "RAW dependence C -> C on buffer C between updates of a reduction",
                      "re:C\\(i=\\d+, j=\\d+, k=\\d+\\) reads C\\[\\d+, \\d+\\] written by "
                      "C\\(i=\\d+, j=\\d+, k=\\d+\\)", "rfactor")


def test_parallel_inside_a_parallel_loop_is_refused():
    sch, (i, j, k) = matmul_sch()
    sch.parallel(i)
    refused_unchanged(sch, lambda: sch.parallel(j), "cannot parallelize loop 'j'",
                      "inside parallel loop 'i'")


def test_parallel_of_the_fused_outer_loops(rng):
    n = 19
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.compute((n, n), lambda i, j: A[j, i] + 1.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    f = sch.fuse(i, j)
    sch.parallel(f)
    assert lines(sch)[0] == "for i_j_fused in parallel(361):"
    a = rng.standard_normal((n, n), dtype="float32")
    out = poisoned((n, n))
    pl.build(sch)(a, out)
    np.testing.assert_array_equal(out, a.T + 1.0)


# vectorize --------------------------------------------------------------------------------------

def test_vectorize_inner_split_loop(rng):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    assert "for j_1 in vectorized(min(8, n - 8 * j_0)):" in lines(sch)
    assert "explicit vectors of" in pl.build(sch).source
    check_matmul_relu(sch, rng)


def test_vectorize_refuses_a_loop_with_loops_inside():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.vectorize(j), "cannot vectorize loop 'j'",
                      "it contains loop 'k'; vectorize an innermost loop")


def test_vectorize_refuses_the_innermost_reduction_loop():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.vectorize(k), "cannot vectorize loop 'k'",
                      "between updates of a reduction", "rfactor")


def test_vectorize_refuses_a_loop_carrying_a_dependence():
    """A prefix sum written in place: X[i] = X[i-1] + X[i]."""
    n = Var("n", VarKind.PARAM)
    X = Buffer("X", (n,), DType.FLOAT32, BufferRole.INOUT)
    i = Var("i")
    S = Statement("S", ("i",), "[n] -> { S[i] : 1 <= i < n }", "X", (i,), X[i - 1] + X[i])
    sch = pl.Schedule(Program("scan", (X,), (S,), ("n",), ("X",)))
    (loop,) = sch.get_loops("S")
    refused_unchanged(sch, lambda: sch.vectorize(loop), "cannot vectorize loop 'i'",
                      "RAW dependence S -> S on buffer X", "(distance (1,))",
                      "re:S\\(i=(\\d+)\\) reads X\\[\\d+\\] written by S\\(i=\\d+\\)")


# unroll -------------------------------------------------------------------------------------

def test_unroll_by_factor_and_fully(rng):
    sch, (i, j, k) = matmul_sch()
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.unroll(k1)
    j0, j1 = sch.split(j, factors=[None, 3])
    sch.unroll(j0, factor=2)
    text = lines(sch)
    assert "for k_1 in unrolled(min(4, n - 4 * k_0)):" in text
    assert any(t.startswith("for j_0 in unrolled(") for t in text)
    src = pl.build(sch).source
    assert "#pragma GCC unroll 2" in src
    check_matmul_relu(sch, rng)


@pytest.mark.parametrize("factor", [0, -2, 1.5])
def test_unroll_refuses_a_factor_that_is_not_positive(factor):
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.unroll(k, factor=factor),
                      "unroll factor must be a positive integer")


# bind -----------------------------------------------------------------------------------------

def test_bind_is_recorded_and_printed():
    sch, (i, j, k) = matmul_sch()
    sch.bind(i, "blockIdx.x")
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.bind(j1, "threadIdx.x")
    assert "for i in bind(n, 'blockIdx.x'):" in lines(sch)
    assert "for j_1 in bind(min(8, n - 8 * j_0), 'threadIdx.x'):" in lines(sch)
    assert [s.primitive for s in sch.trace][-3:] == ["bind", "split", "bind"]


def test_bind_refuses_unknown_axes_and_reduction_loops():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.bind(i, "threadIdx.w"), "unknown thread axis",
                      "threadIdx.x")
    refused_unchanged(sch, lambda: sch.bind(k, "blockIdx.x"), "cannot bind loop 'k'",
                      "between updates of a reduction", "rfactor")
    # on work-items a reduction loop becomes a tree reduction across them
    # (tests/schedule/test_cross_thread_reduction.py)


def test_bound_loops_are_refused_by_the_c_target():
    sch, (i, j, k) = matmul_sch()
    sch.bind(i, "blockIdx.x")
    with pytest.raises(pl.PolyloopError):
        pl.build(sch)


# annotate -------------------------------------------------------------------------------------

def test_annotate_prints_a_comment_and_keeps_results(rng):
    sch, (i, j, k) = matmul_sch()
    sch.annotate(j, "pragma_auto_unroll", 16)
    sch.annotate(j, "pragma_auto_unroll", 32)      # same key: replaced
    text = str(sch)
    assert "for j in range(n):  # pragma_auto_unroll=32" in text
    assert "=16" not in text
    check_matmul_relu(sch, rng)


def test_annotate_needs_a_loop_of_the_schedule():
    sch, (i, j, k) = matmul_sch()
    sch.split(j, factors=[None, 2])
    raises_schedule_error(lambda: sch.annotate(j, "x", 1), "annotate", "no longer in the schedule")
