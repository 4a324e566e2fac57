# SPDX-License-Identifier: Apache-2.0
"""``reorder`` and ``tile`` (split + reorder): legal exactly when every dependence stays
lexicographically positive; the updates of a declared reduction may be reordered."""
from __future__ import annotations

import pytest

import polyloop as pl

from .programs import (check_diagonal, check_matmul_relu, check_stencil, diagonal_stencil,
                       indent_of, lines, matmul_sch, refused_unchanged, stencil)


def test_reorder_moves_the_reduction_loop_between_split_loops(rng):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    assert indent_of(sch, "for j_0 in") < indent_of(sch, "for k in") < indent_of(sch, "for j_1 in")
    check_matmul_relu(sch, rng)


def test_reorder_of_a_reduction_loop_outermost_is_legal(rng):
    """Reduction updates are associative: k may run outside i and j (rounding may differ)."""
    sch, (i, j, k) = matmul_sch()
    sch.reorder(k, i, j)
    text = lines(sch)
    c = text.index("C[i, j] += A[i, k] * B[k, j]")
    assert text[c - 3:c] == ["for k in range(n):", "for i in range(n):", "for j in range(n):"]
    check_matmul_relu(sch, rng)


def test_reorder_of_a_subset_keeps_the_other_loops_in_place():
    sch, (i, j, k) = matmul_sch()
    sch.reorder(k, i)   # i, j, k -> k, j, i
    text = lines(sch)
    c = text.index("C[i, j] += A[i, k] * B[k, j]")
    assert text[c - 3:c] == ["for k in range(n):", "for j in range(n):", "for i in range(n):"]


def test_interchange_of_the_stencil_is_legal_both_distances_stay_positive(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.reorder(j, i)
    assert lines(sch)[:2] == ["for j in range(1, n):", "for i in range(1, n):"]
    check_stencil(sch, rng)


def test_interchange_that_reverses_a_dependence_is_refused_with_a_witness():
    sch = pl.Schedule(diagonal_stencil())
    i, j = sch.get_loops("S")
    refused_unchanged(sch, lambda: sch.reorder(j, i),
                      "reorder(j, i) would break the RAW dependence S -> S on buffer A",
                      "(distance (1, -1))",
                      "re:S\\(i=(\\d+), j=(\\d+)\\) reads A\\[\\d+, \\d+\\] written by "
                      "S\\(i=\\d+, j=\\d+\\)", "It becomes legal after skew(i, j, 1).")


def test_reorder_refuses_loops_of_another_block():
    sch, (i, j, k) = matmul_sch()
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.reorder(j, di), "reorder", "not nested in one another")


def test_reorder_refuses_a_loop_listed_twice():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.reorder(i, i), "reorder", "listed twice")


def test_reorder_refuses_loops_that_are_not_perfectly_nested():
    sch, (i, j, k) = matmul_sch()
    outer = sch.get_loops("D")[0]
    sch.compute_at(sch.get_block("C"), outer)      # C's nests and D's j loop now share outer
    k = sch.get_loops("C")[-1]
    refused_unchanged(sch, lambda: sch.reorder(k, outer), "reorder",
                      "loop 'i' is not perfectly nested")


# tile ---------------------------------------------------------------------------------------

def test_tile_gives_four_loops_in_tile_order(rng):
    sch, (i, j, k) = matmul_sch()
    i0, j0, i1, j1 = sch.tile(i, j, 8, 5)
    assert [x.name for x in sch.get_loops("C")] == ["i_0", "j_0", "i_1", "j_1", "k"]
    text = lines(sch)
    assert "for i_1 in range(min(8, n - 8 * i_0)):" in text
    assert "for j_1 in range(min(5, n - 5 * j_0)):" in text
    check_matmul_relu(sch, rng)


def test_tile_of_the_stencil_is_legal(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.tile(i, j, 4, 3)
    check_stencil(sch, rng)


def test_tile_refused_when_a_distance_is_negative_and_nothing_changes():
    sch = pl.Schedule(diagonal_stencil())
    i, j = sch.get_loops("S")
    refused_unchanged(sch, lambda: sch.tile(i, j, 4, 4), "tile(i, j, 4, 4)",
                      "RAW dependence S -> S on buffer A", "(distance (1, -1))",
                      "Tiling becomes legal after skew(i, j, 1).")
    assert sch.get_loops("S") == [i, j]


def test_skew_makes_the_tiling_legal(rng):
    sch = pl.Schedule(diagonal_stencil())
    i, j = sch.get_loops("S")
    sch.skew(i, j, 1)           # distance (1, -1) becomes (1, 0)
    sch.tile(i, j, 4, 4)
    assert [x.name for x in sch.get_loops("S")] == ["i_0", "j_0", "i_1", "j_1"]
    check_diagonal(sch, rng)


@pytest.mark.parametrize("sizes", [(3, 7), (16, 16)])
def test_tile_sizes_that_do_not_divide(rng, sizes):
    sch, (i, j, k) = matmul_sch()
    sch.tile(i, j, *sizes)
    check_matmul_relu(sch, rng, sizes=(5, 29))
