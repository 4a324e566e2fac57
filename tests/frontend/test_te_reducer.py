# SPDX-License-Identifier: Apache-2.0
"""``pl.comm_reducer`` (TVM's ``te.comm_reducer``) and product reductions, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

product = pl.comm_reducer(lambda x, y: x * y, lambda dtype: pl.const(1, dtype), name="product")
biggest = pl.comm_reducer(lambda x, y: pl.maximum(x, y),
                          lambda dtype: pl.const(float("-inf"), dtype), name="biggest")


@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (9, 13)])
def test_product_over_an_axis_at_symbolic_sizes(shape, rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    k = pl.reduce_axis((0, m), name="k")
    P = pl.compute((n,), lambda i: product(A[i, k], axis=k), name="P")
    a = rng.uniform(0.5, 1.5, shape)
    got = np.full(shape[0], np.nan)
    pl.build(P)(a, got)
    np.testing.assert_allclose(got, a.prod(axis=1), rtol=1e-12)


def test_product_split_and_rfactored_is_still_the_product(rng):
    A = pl.placeholder((6, 37), "float64", name="A")
    k = pl.reduce_axis((0, 37), name="k")
    P = pl.compute((6,), lambda i: product(A[i, k], axis=k), name="P")
    sch = pl.Schedule(P)
    i, kk = sch.get_loops(sch.get_block("P"))
    ko, ki = sch.split(kk, factor=8)
    sch.reorder(i, ki, ko)
    a = rng.uniform(0.5, 1.5, (6, 37))
    np.testing.assert_allclose(pl.build(sch)(a), a.prod(axis=1), rtol=1e-12)


def test_a_reducer_that_is_max(rng):
    A = pl.placeholder((4, 7), "float32", name="A")
    k = pl.reduce_axis((0, 7), name="k")
    M = pl.compute((4,), lambda i: biggest(A[i, k], axis=k), name="M")
    a = rng.standard_normal((4, 7)).astype("float32")
    np.testing.assert_array_equal(pl.build(M)(a), a.max(axis=1))


def test_script_multiplies_as_a_reduction(rng):
    def prods(n: int, A: pl.Buffer[("n", 4), "float64"], p: pl.Buffer[("n",), "float64"]):
        for i in range(n):
            p[i] = 1.0
            for j in range(4):
                p[i] *= A[i, j]
    prog = pl.script(prods)
    assert prog.statements[1].reduction is not None
    a = rng.uniform(0.5, 1.5, (5, 4))
    np.testing.assert_allclose(pl.build(pl.auto_schedule(prog))(a), a.prod(axis=1), rtol=1e-12)


def test_a_combiner_that_is_no_known_reduction_folds_in_axis_order(rng):
    odd = pl.comm_reducer(lambda x, y: pl.where(x > y, x, y) - 1.0,
                          lambda dtype: pl.const(0.0, dtype), name="odd")
    n = pl.var("n")
    A = pl.placeholder((4, n), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    F = pl.compute((4,), lambda i: odd(A[i, k], axis=k), name="F")
    assert isinstance(F, pl.Tensor) and F.group is not None
    a = rng.uniform(-3, 3, (4, 7)).astype("float32")
    want = np.zeros(4, "float32")
    for j in range(7):
        want = np.where(want > a[:, j], want, a[:, j]) - np.float32(1)
    got = np.full(4, np.nan, "float32")
    pl.build(F)(a, got)
    np.testing.assert_array_equal(got, want)


def test_wrong_identity_is_refused():
    bad = pl.comm_reducer(lambda x, y: x * y, lambda dtype: pl.const(0, dtype), name="bad")
    A = pl.placeholder((4, 7), "float32", name="A")
    k = pl.reduce_axis((0, 7), name="k")
    with pytest.raises(pl.PolyloopError, match=r"a prod starts from 1"):
        pl.compute((4,), lambda i: bad(A[i, k], axis=k))


def test_compute_with_several_outputs(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    lo, hi = pl.compute((n,), lambda i: (pl.minimum(A[i], B[i]), pl.maximum(A[i], B[i])),
                        name="L")
    assert (lo.name, hi.name) == ("L", "L_1")
    a, b = (rng.standard_normal(11).astype("float32") for _ in range(2))
    got_lo, got_hi = np.full(11, np.nan, "float32"), np.full(11, np.nan, "float32")
    pl.build(pl.Schedule(lo, hi))(a, b, got_lo, got_hi)
    np.testing.assert_array_equal(got_lo, np.minimum(a, b))
    np.testing.assert_array_equal(got_hi, np.maximum(a, b))
