# SPDX-License-Identifier: Apache-2.0
"""Register promotion: an element updated in every iteration of an inner loop is loaded once,
kept in a register (a loop-local temporary the C compiler keeps in registers) and stored once;
never when another access in the nest could reach the same element."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.expr import loads
from polyloop.ir.loops import For, Store, iter_nodes
from polyloop.lower.lower import lower
from polyloop.testing import interpret


def ladder_step(n, *, unroll: bool) -> pl.Schedule:
    """TVM's GEMM tutorial after 'loop permutation': 32 x 32 tiles, k split by 4, the row of 32
    C elements vectorized innermost (and k's inner loop unrolled, as its 'write cache' step)."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    i, j, kk = sch.get_loops("C")
    mo, mi = sch.split(i, [None, 32])
    no, ni = sch.split(j, [None, 32])
    ko, ki = sch.split(kk, [None, 4])
    sch.reorder(mo, no, ko, mi, ki, ni)
    sch.vectorize(ni)
    if unroll:
        sch.unroll(ki)
    return sch


def accesses(node, buffer: str) -> tuple[int, int]:
    """(loads, stores) of ``buffer`` written in the loop AST under ``node``."""
    nl = ns = 0
    for n in iter_nodes(node):
        if isinstance(n, Store):
            ns += n.buffer == buffer
            nl += sum(ld.buffer == buffer for e in (n.value, *n.indices) for ld in loads(e))
    return nl, ns


def loops_named(node, var: str) -> list[For]:
    return [n for n in iter_nodes(node) if isinstance(n, For) and n.var == var]


@pytest.mark.parametrize("n", [64, 100, pl.var("n")], ids=["dividing", "100", "symbolic"])
def test_accumulator_row_is_kept_in_registers_across_k(n):
    sch = ladder_step(n, unroll=True)
    kernel = lower(sch.program, sch.state.root)
    assert any("kept in registers (C_reg) across loop 'k_1'" in note for note in kernel.notes)
    # the full tiles come first (isl isolates them); in a partial tile whose row length has
    # no constant bound that isl wrote out, C stays in memory
    full = loops_named(kernel.body, "i_1")[0]
    (k1,) = loops_named(full, "k_1")
    assert accesses(k1, "C") == (0, 0)
    # per row of a tile: one load (before k_1) and one store (after), each a vector loop
    assert accesses(full, "C") == (1, 1)
    if isinstance(n, int):
        assert all(accesses(k1, "C") == (0, 0) for k1 in loops_named(kernel.body, "k_1"))
    reg = next(t for t in kernel.temps if t.name == "C_reg")
    assert [d.value for d in reg.shape] == [32]


@pytest.mark.parametrize("n, size", [(100, None), (pl.var("n"), 67), (pl.var("n"), 96)])
@pytest.mark.parametrize("unroll", [False, True])
def test_promoted_matmul_matches_numpy(n, size, unroll, rng):
    m = size or n
    mod = pl.build(ladder_step(n, unroll=unroll))
    assert "C_reg" in mod.source
    a = rng.random((m, m), dtype=np.float32)
    b = rng.random((m, m), dtype=np.float32)
    c = np.full((m, m), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pl.script
def row_sums(A: pl.Buffer[("n", "m"), "float64"], Y: pl.Buffer[("n",), "float64"]):
    for i in range(n):  # noqa: F821 - n, m: size parameters of A's shape
        for k in range(m):  # noqa: F821
            Y[i] = Y[i] + A[i, k]


def test_scalar_accumulator_is_promoted_and_guarded_for_an_empty_loop(rng):
    kernel = lower(row_sums, pl.Schedule(row_sums).state.root)
    (k,) = loops_named(kernel.body, "k")
    assert accesses(k, "Y") == (0, 0)
    mod = pl.build(row_sums)
    a = rng.standard_normal((7, 5))
    y = rng.standard_normal(7)
    want = y + a.sum(axis=1)
    mod(a, y)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    # m = 0: the copies must not run (they would read and write Y for nothing, or out of
    # bounds for an empty buffer); Y keeps its values
    y0 = rng.standard_normal(3)
    before = y0.copy()
    mod(np.zeros((3, 0)), y0)
    np.testing.assert_array_equal(y0, before)


@pl.script
def self_update(W: pl.Buffer[("n",), "float64"], X: pl.Buffer[("n",), "float64"]):
    for i in range(n):  # noqa: F821
        for k in range(n):  # noqa: F821
            X[i] = X[i] + W[k] * X[k]


def self_update_reference(w, x):
    x = x.copy()
    for i in range(len(x)):
        for k in range(len(x)):
            x[i] = x[i] + w[k] * x[k]
    return x


def test_element_read_through_another_index_is_not_promoted(rng):
    kernel = lower(self_update, pl.Schedule(self_update).state.root)
    (k,) = loops_named(kernel.body, "k")
    assert accesses(k, "X") == (2, 1)      # X[i] and X[k] read, X[i] written: all in memory
    assert not any("registers" in note for note in kernel.notes)
    w, x = rng.standard_normal(9) * 0.3, rng.standard_normal(9)
    want = self_update_reference(w, x)
    pl.build(self_update)(w, x)
    np.testing.assert_allclose(x, want, rtol=1e-12)


@pl.script
def cholesky_update(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):  # noqa: F821
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]


@pl.script
def reaching_update(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):  # noqa: F821
        for j in range(i):
            for k in range(j + 1):          # k = j reads A[i, j] itself
                A[i, j] -= A[i, k] * A[j, k]


@pytest.mark.parametrize("script, kept", [(cholesky_update, True), (reaching_update, False)])
def test_other_elements_of_the_buffer_leave_the_accumulator_in_a_register(script, kept, rng):
    """A[i, k] and A[j, k] with k < j < i never are A[i, j] (isl shows it), so A[i, j] stays in
    a register across k; with k <= j, A[i, k] is A[i, j] at k = j, and nothing is promoted."""
    kernel = lower(script, pl.Schedule(script).state.root)
    (k,) = loops_named(kernel.body, "k")
    assert accesses(k, "A") == ((2, 0) if kept else (3, 1))
    assert any("kept in registers" in note for note in kernel.notes) == kept
    for n in (1, 9):
        a = rng.standard_normal((n, n)) * 0.3
        want = a.copy()
        interpret(script, want)
        pl.build(script)(a)
        np.testing.assert_allclose(a, want, rtol=1e-12)
