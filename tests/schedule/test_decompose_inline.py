# SPDX-License-Identifier: Apache-2.0
"""``decompose_reduction`` (the initialization hoisted right above a loop) and the inlining
primitives ``compute_inline`` / ``reverse_compute_inline``."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var, VarKind
from polyloop.ir.program import Buffer, BufferRole, Program, Statement

from .programs import (check_conv, check_matmul_relu, conv2d, indent_of, lines, matmul_sch,
                       poisoned, refused_unchanged)


def test_decompose_reduction_puts_the_init_right_above_the_loop(rng):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction("C", k)
    text = lines(sch)
    at = text.index("C[i, j] = 0.0")
    assert text[at - 3:at + 2] == ["for i in range(n):", "for j_0 in range((n - 1) // 8 + 1):",
                                   "for j in range(8 * j_0, min(n, 8 * j_0 + 8)):",
                                   "C[i, j] = 0.0", "for k in range(n):"]
    assert indent_of(sch, "for j in range(8 * j_0") == indent_of(sch, "for k in range(n):")
    check_matmul_relu(sch, rng)


def test_decompose_reduction_at_the_reduction_loop_of_the_default_nest(rng):
    sch, (i, j, k) = matmul_sch()
    sch.decompose_reduction("C", k)
    assert lines(sch)[:5] == ["for i in range(n):", "for j in range(n):", "C[i, j] = 0.0",
                              "for k in range(n):", "C[i, j] += A[i, k] * B[k, j]"]
    check_matmul_relu(sch, rng)


def test_decompose_reduction_under_a_reduction_loop_is_refused():
    """With k outside j, an init above j would reset C on every k iteration."""
    sch, (i, j, k) = matmul_sch()
    sch.reorder(i, k, j)
    refused_unchanged(sch, lambda: sch.decompose_reduction("C", j), "decompose_reduction",
                      "loop 'k' encloses loop 'j' and runs over a reduction axis")


def test_decompose_reduction_wrong_uses():
    sch, (i, j, k) = matmul_sch()
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.decompose_reduction("D", di), "decompose_reduction",
                      "block 'D' is not a reduction")
    refused_unchanged(sch, lambda: sch.decompose_reduction("C", di), "decompose_reduction",
                      "loop 'i' is not a loop of block 'C'")


# compute_inline -----------------------------------------------------------------------------

def _chain():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    T = pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="T")
    U = pl.compute((n, n), lambda i, j: T[j, i] + T[i, j], name="U")
    V = pl.compute((n, n), lambda i, j: pl.exp(U[i, j] * 0.1), name="V")
    return V


def _check_chain(sch, rng, sizes=(1, 6, 23)):
    mod = pl.build(sch)
    for size in sizes:
        a = rng.standard_normal((size, size), dtype="float32")
        out = poisoned((size, size))
        mod(a, out)
        np.testing.assert_allclose(out, np.exp((2 * a.T + 2 * a) * 0.1), rtol=1e-5)


def test_compute_inline_substitutes_the_producer_and_drops_its_buffer(rng):
    sch = pl.Schedule(_chain())
    sch.compute_inline("T")
    assert "U[i, j] = A[j, i] * 2.0 + A[i, j] * 2.0" in lines(sch)
    assert "T[" not in str(sch)
    assert [b.name for b in sch.blocks()] == ["U", "V"]
    assert all(b.name != "T" for b in sch.program.buffers)
    _check_chain(sch, rng)


def test_reverse_compute_inline_merges_the_consumer_into_its_producer(rng):
    sch = pl.Schedule(_chain())
    sch.compute_inline("T")
    sch.reverse_compute_inline("V")
    assert lines(sch) == ["for i in range(n):", "for j in range(n):",
                          "V[i, j] = exp((A[j, i] * 2.0 + A[i, j] * 2.0) * 0.1)"]
    _check_chain(sch, rng)


def test_compute_inline_of_the_conv_padding(rng):
    shape = (1, 3, 2, 7, 9)
    sch = pl.Schedule(conv2d(*shape))
    sch.compute_inline("P")
    text = str(sch)
    assert "P[" not in text and "where(" in text
    check_conv(sch, rng, shape)


def test_inline_refuses_reductions_outputs_and_unknown_blocks():
    sch = pl.Schedule(_chain())
    refused_unchanged(sch, lambda: sch.compute_inline("V"), "compute_inline",
                      "block 'V' writes 'V', an argument of the program")
    refused_unchanged(sch, lambda: sch.reverse_compute_inline("U"), "reverse_compute_inline",
                      "block 'U' must read 'T' at its own iterators (i, j)")
    refused_unchanged(sch, lambda: sch.compute_inline("X"), "no block named 'X'")
    msch, _ = matmul_sch()
    refused_unchanged(msch, lambda: msch.compute_inline("C"), "compute_inline",
                      "block 'C' is a reduction")
    refused_unchanged(msch, lambda: msch.reverse_compute_inline("D"), "reverse_compute_inline",
                      "'C' is written by 2 statements")


def _hazard() -> Program:
    """T[i] = A[i] + 1; A[i] = 0 (in place); B[i] = 3 T[i]. Inlining T into B would read the
    zeroed A."""
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INOUT)
    T = Buffer("T", (n,), DType.FLOAT64, BufferRole.TEMP)
    B = Buffer("B", (n,), DType.FLOAT64, BufferRole.OUTPUT)
    i = Var("i")
    return Program("hazard", (A, T, B), (
        Statement("T", ("i",), "[n] -> { T[i] : 0 <= i < n }", "T", (i,), A[i] + 1.0),
        Statement("Z", ("i",), "[n] -> { Z[i] : 0 <= i < n }", "A", (i,), A[i] * 0.0),
        Statement("B", ("i",), "[n] -> { B[i] : 0 <= i < n }", "B", (i,), T[i] * 3.0),
    ), ("n",), ("A", "B"))


def test_compute_inline_refused_when_its_inputs_change_before_the_consumer_runs(rng):
    sch = pl.Schedule(_hazard())
    refused_unchanged(sch, lambda: sch.compute_inline("T"),
                      "compute_inline of 'T' into 'B' would break the WAR dependence T -> Z "
                      "on buffer A", "re:Z\\(i=\\d+\\) overwrites A\\[\\d+\\] read by T\\(i=\\d+\\)")
    a = rng.standard_normal(9)
    b = poisoned((9,), "float64")
    expected = 3 * (a + 1.0)
    pl.build(sch)(a, b)
    np.testing.assert_array_equal(b, expected)
    np.testing.assert_array_equal(a, 0.0)


@pytest.mark.parametrize("primitive", ["compute_inline", "reverse_compute_inline"])
def test_inlining_a_shifted_access(rng, primitive):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    T = pl.compute((n,), lambda i: A[i] * 2.0, name="T")
    U = pl.compute((n - 1,), lambda i: T[i + 1] - 1.0, name="U")
    sch = pl.Schedule(U)
    if primitive == "reverse_compute_inline":
        refused_unchanged(sch, lambda: sch.reverse_compute_inline("U"),
                          "block 'U' must read 'T' at its own iterators (i)")
        return
    sch.compute_inline("T")
    assert lines(sch) == ["for i in range(n - 1):", "U[i] = A[i + 1] * 2.0 - 1.0"]
    a = rng.standard_normal(12, dtype="float32")
    out = poisoned((11,))
    pl.build(sch)(a, out)
    np.testing.assert_allclose(out, a[1:] * 2.0 - 1.0, rtol=1e-6)


def test_reverse_compute_inline_refused_when_the_consumer_would_read_too_early(rng):
    """T = A + 1; X = 0 (in place); U = T + X. Merging U into T would read X before Z zeroes
    it."""
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INPUT)
    X = Buffer("X", (n,), DType.FLOAT64, BufferRole.INOUT)
    T = Buffer("T", (n,), DType.FLOAT64, BufferRole.TEMP)
    U = Buffer("U", (n,), DType.FLOAT64, BufferRole.OUTPUT)
    i = Var("i")
    prog = Program("late", (A, X, T, U), (
        Statement("T", ("i",), "[n] -> { T[i] : 0 <= i < n }", "T", (i,), A[i] + 1.0),
        Statement("Z", ("i",), "[n] -> { Z[i] : 0 <= i < n }", "X", (i,), X[i] * 0.0),
        Statement("U", ("i",), "[n] -> { U[i] : 0 <= i < n }", "U", (i,), T[i] + X[i]),
    ), ("n",), ("A", "X", "U"))
    sch = pl.Schedule(prog)
    refused_unchanged(sch, lambda: sch.reverse_compute_inline("U"),
                      "reverse_compute_inline of 'U' would break the RAW dependence Z -> U on "
                      "buffer X", "re:U\\(i=\\d+\\) reads X\\[\\d+\\] written by Z\\(i=\\d+\\)")
    a, x = rng.standard_normal((2, 8))
    u = poisoned((8,), "float64")
    pl.build(sch)(a, x, u)
    np.testing.assert_array_equal(u, a + 1.0)
