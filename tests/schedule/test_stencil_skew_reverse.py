# SPDX-License-Identifier: Apache-2.0
"""Seed 002's in-place stencil ``A[i, j] = A[i-1, j] + A[i, j-1]``: neither loop may run in
parallel, but after skewing j by i and interchanging, the inner loop is a parallel wavefront.
Also ``skew`` and ``reverse`` on their own."""
from __future__ import annotations

import re

import pytest

import polyloop as pl

from .programs import (check_matmul_relu, check_stencil, lines, matmul_sch, raises_schedule_error,
                       refused_unchanged, stencil)


@pytest.mark.parametrize("which, distance, witness", [
    (0, "(1, 0)", "re:S\\(i=(\\d+), j=(\\d+)\\) reads A\\[\\d+, \\d+\\] written by S\\(i=\\d+, j=\\d+\\)"),
    (1, "(0, 1)", "re:S\\(i=(\\d+), j=(\\d+)\\) reads A\\[\\d+, \\d+\\] written by S\\(i=\\d+, j=\\d+\\)"),
], ids=["i", "j"])
def test_parallel_of_either_stencil_loop_is_refused(which, distance, witness):
    sch = pl.Schedule(stencil())
    loop = sch.get_loops("S")[which]
    msg = refused_unchanged(sch, lambda: sch.parallel(loop),
                            f"cannot parallelize loop '{loop.name}'",
                            "RAW dependence S -> S on buffer A", f"(distance {distance})",
                            "for instance", witness, "(with n=")
    assert "rfactor" not in msg


def test_parallel_witness_is_a_real_instance_of_the_dependence():
    sch = pl.Schedule(stencil())
    i, _ = sch.get_loops("S")
    msg = raises_schedule_error(lambda: sch.parallel(i))
    m = re.search(r"S\(i=(\d+), j=(\d+)\) reads A\[(\d+), (\d+)\] written by S\(i=(\d+), j=(\d+)\)",
                  msg)
    si, sj, ai, aj, wi, wj = map(int, m.groups())
    assert (ai, aj) == (si - 1, sj) == (wi, wj)


def test_skew_then_interchange_makes_the_inner_wavefront_parallel(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, 1)                       # j' = j + i: distances (1, 1) and (0, 1)
    assert lines(sch)[:2] == ["for i in range(1, n):", "for j in range(i + 1, n + i):"]
    refused_unchanged(sch, lambda: sch.parallel(j), "cannot parallelize loop 'j'",
                      "(distance (0, 1))")
    sch.reorder(j, i)                       # the wavefront j' outside: distances (1, 0), (2, 1)... positive
    sch.parallel(i)
    text = lines(sch)
    assert text[0] == "for j in range(2, 2 * n - 1):"
    assert text[1].startswith("for i in parallel(max(1, -n + j + 1), min(n, j)):")
    assert text[2] == "A[i, j - i] = A[i - 1, j - i] + A[i, j - i - 1]"
    refused_unchanged(sch, lambda: sch.parallel(j), "cannot parallelize loop 'j'")
    check_stencil(sch, rng)
    assert "#pragma omp parallel for" in pl.build(sch).source


def test_skew_by_two_is_also_correct(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, 2)
    sch.reorder(j, i)
    sch.parallel(i)
    check_stencil(sch, rng)


def test_skew_refuses_a_zero_factor_and_loops_not_nested():
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    refused_unchanged(sch, lambda: sch.skew(i, j, 0), "skew factor must be a non-zero integer")
    refused_unchanged(sch, lambda: sch.skew(j, i, 1), "skew", "loop 'i' is not inside loop 'j'")


def test_negative_skew_that_breaks_a_dependence_is_refused():
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, -1)          # legal alone (the outer i still carries (1, 0))
    refused_unchanged(sch, lambda: sch.reorder(j, i),
                      "reorder(j, i) would break the RAW dependence S -> S on buffer A",
                      "(distance (1, 0))")


# reverse ------------------------------------------------------------------------------------

def test_reverse_of_independent_loops_matches_numpy(rng):
    sch, (i, j, k) = matmul_sch()
    sch.reverse(i)
    sch.reverse(k)     # a reduction loop: its updates may run in any order
    text = lines(sch)
    assert "for i in range(-n + 1, 1):" in text
    assert "C[-i, j] += A[-i, -k] * B[-k, j]" in text
    check_matmul_relu(sch, rng)


@pytest.mark.parametrize("which, distance", [(0, "(1, 0)"), (1, "(0, 1)")], ids=["i", "j"])
def test_reverse_of_a_stencil_loop_is_refused(which, distance):
    sch = pl.Schedule(stencil())
    loop = sch.get_loops("S")[which]
    refused_unchanged(sch, lambda: sch.reverse(loop),
                      f"reverse({loop.name}) would break the RAW dependence S -> S on buffer A",
                      f"(distance {distance})", "reads A[")
