# SPDX-License-Identifier: Apache-2.0
"""``split``: one loop becomes nested loops of given trip counts; isl writes exact bounds for
extents that do not divide and for symbolic extents."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

from .programs import (check_matmul_relu, check_stencil, lines, matmul_sch, poisoned,
                       raises_schedule_error, refused_unchanged, stencil, vector_add)


def test_split_by_8_prints_a_guarded_inner_loop():
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    assert (j0.name, j1.name) == ("j_0", "j_1")
    text = lines(sch)
    assert "for j_0 in range((n - 1) // 8 + 1):" in text
    assert "for j_1 in range(min(8, n - 8 * j_0)):" in text
    assert "C[i, 8 * j_0 + j_1] += A[i, k] * B[k, 8 * j_0 + j_1]" in text


@pytest.mark.parametrize("factors", [[None, 8], [None, 4, 3], [None, 1], [None, 64]],
                         ids=["8", "4x3", "1", "64"])
def test_split_matches_numpy_at_sizes_that_do_not_divide(rng, factors):
    sch, (i, j, k) = matmul_sch()
    sch.split(k, factors=factors)
    check_matmul_relu(sch, rng, sizes=(1, 13, 37))


def test_split_with_names_and_a_constant_outer_factor():
    n = 50
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    sch = pl.Schedule(B)
    (i,) = sch.get_loops("B")
    outer, inner = sch.split(i, factors=[3, None], names=["io", "ii"])   # 3 x 17 covers 50
    assert (outer.name, inner.name) == ("io", "ii")
    text = lines(sch)
    assert "for io in range(3):" in text
    assert any(t.startswith("for ii in range(min(17,") for t in text), text
    a = np.random.default_rng(1).standard_normal(n, dtype="float32")
    out = poisoned((n,))
    pl.build(sch)(a, out)
    np.testing.assert_array_equal(out, a * 2.0 + 1.0)


def test_split_of_a_loop_that_starts_at_one(rng):
    sch = pl.Schedule(stencil())
    i, j = sch.get_loops("S")
    sch.split(i, factors=[None, 4])
    sch.split(j, factors=[None, 3])
    assert "for i_0 in range(" in str(sch)
    check_stencil(sch, rng)


def test_split_handles_are_the_new_loops_and_the_old_one_is_gone():
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    assert sch.get_loops("C") == [i, j0, j1, k]
    refused_unchanged(sch, lambda: sch.split(j, factors=[None, 2]),
                      "split", "loop 'j' is no longer in the schedule")
    refused_unchanged(sch, lambda: sch.parallel(j), "loop 'j' is no longer in the schedule")


@pytest.mark.parametrize("factors, fragment", [
    ([0, None], "factors must be positive integers"),
    ([None, -4], "factors must be positive integers"),
    ([None, 2.5], "factors must be positive integers"),
    ([None, True], "factors must be positive integers"),
    ([None, None], "at most one factor may be None"),
    ([8], "needs at least two factors"),
    ([4, None], "needs a constant extent"),
])
def test_split_refuses_bad_factors(factors, fragment):
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.split(j, factors=factors), "split", "'j'", fragment)


def test_split_refuses_the_wrong_number_of_names():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.split(j, factors=[None, 4], names=["a"]),
                      "2 factors but 1 names")


def test_split_refuses_something_that_is_not_a_loop():
    sch, _ = matmul_sch()
    raises_schedule_error(lambda: sch.split("j", factors=[None, 4]), "split", "expected a loop")


def test_split_of_a_vector_add_seed_003(rng):
    """Seed 003: s[C].split(C.op.axis[0], factor=4) then reorder; result unchanged."""
    sch = pl.Schedule(vector_add())
    (i,) = sch.get_loops("C")
    outer, inner = sch.split(i, factors=[None, 4])
    sch.reorder(inner, outer)
    text = lines(sch)
    assert text[0].startswith("for i_1 in range(")
    assert text[1].startswith("for i_0 in range(")
    mod = pl.build(sch)
    for size in (1, 7, 4097):
        a, b = rng.standard_normal((2, size), dtype="float32")
        c = poisoned((size,))
        mod(a, b, c)
        np.testing.assert_array_equal(c, a + b)
