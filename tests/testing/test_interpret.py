# SPDX-License-Identifier: Apache-2.0
"""The reference interpreter (and domain enumeration) against NumPy and plain Python loops."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.errors import ArgumentError, PolyloopError
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import ReduceKind, UnaryKind, Var, as_expr, cast, unary
from polyloop.ir.program import Buffer, BufferRole, Program, Statement, param
from polyloop.poly.enumerate import points
from polyloop.testing import interpret

RNG = np.random.default_rng(0)


def rand(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def single_statement(domain: str, iters: tuple[str, ...], buffers: tuple[Buffer, ...],
                     write: tuple, value, *, reduction: ReduceKind | None = None) -> Program:
    """A Program of one statement ``S`` writing buffers[-1][write] = value over ``domain``."""
    target = buffers[-1]
    value = cast(target.dtype, value)
    stmt = Statement("S", iters, domain, target.name, tuple(as_expr(x) for x in write), value,
                     reduction)
    params = tuple(dict.fromkeys(v.name for b in buffers for v in b.shape if isinstance(v, Var)))
    return Program("p", buffers, (stmt,), params or ("n",), tuple(b.name for b in buffers))


# elementwise and reductions through te --------------------------------------------------------

@pytest.mark.parametrize("size", [1, 7, 33])
def test_vector_add_matches_numpy(size: int) -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    C = pl.compute((n,), lambda i: A[i] + B[i], name="C")
    a, b = rand(size), rand(size)
    c = interpret(pl.to_program(C), a, b)
    assert c.dtype == np.float32
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("n_, m_", [(7, 7), (5, 3)])
def test_matmul_matches_numpy(n_: int, m_: int) -> None:
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    B = pl.placeholder((m, n), "float32", name="B")
    k = pl.reduce_axis((0, m), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rand(n_, m_), rand(m_, n_)
    np.testing.assert_allclose(interpret(pl.to_program(C), a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_float32_sum_accumulates_in_float32() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    k = pl.reduce_axis(n, name="k")
    S = pl.compute((1,), lambda i: pl.sum(A[k], axis=k), name="S")
    a = (RNG.random(1001) * 1000).astype("float32")
    expected = np.float32(0)
    for x in a:
        expected = np.float32(expected + x)
    assert interpret(pl.to_program(S), a)[0] == expected


def test_max_reduction_matches_numpy() -> None:
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    k = pl.reduce_axis((0, m), name="k")
    M = pl.compute((n,), lambda i: pl.max(A[i, k], axis=k), name="M")
    a = rand(9, 5, dtype="float64")
    np.testing.assert_array_equal(interpret(pl.to_program(M), a), a.max(axis=1))


def test_softmax_matches_numpy() -> None:
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    k = pl.reduce_axis((0, m), name="k")
    mx = pl.compute((n,), lambda i: pl.max(A[i, k], axis=k), name="mx")
    e = pl.compute((n, m), lambda i, j: pl.exp(A[i, j] - mx[i]), name="e")
    k2 = pl.reduce_axis((0, m), name="k2")
    s = pl.compute((n,), lambda i: pl.sum(e[i, k2], axis=k2), name="s")
    out = pl.compute((n, m), lambda i, j: e[i, j] / s[i], name="out")
    program = pl.to_program(out)
    assert [b.role for b in program.buffers].count(BufferRole.TEMP) == 3
    a = rand(5, 11)
    ex = np.exp(a - a.max(axis=1, keepdims=True))
    got = interpret(program, a)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ex / ex.sum(axis=1, keepdims=True), rtol=1e-5)


def test_int64_broadcast_add() -> None:
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n,), "int64", name="A")
    B = pl.placeholder((m,), "int64", name="B")
    C = pl.compute((n, m), lambda i, j: A[i] + B[j], name="C")
    a, b = RNG.integers(-10**12, 10**12, 5), RNG.integers(-10**12, 10**12, 3)
    c = interpret(pl.to_program(C), a, b)
    assert c.dtype == np.int64
    np.testing.assert_array_equal(c, a[:, None] + b[None, :])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_floor_division_and_modulo_follow_python_on_negatives(dtype: str) -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), dtype, name="A")
    B = pl.placeholder((n,), dtype, name="B")
    Q = pl.compute((n,), lambda i: A[i] // B[i], name="Q")
    R = pl.compute((n,), lambda i: A[i] % B[i], name="R")
    Q3 = pl.compute((n,), lambda i: A[i] // 3, name="Q3")
    R3 = pl.compute((n,), lambda i: A[i] % -3, name="R3")
    a = np.array([-7, 7, -7, 7, 0, -1, 5, -6], dtype)
    b = np.array([2, -2, -2, 2, 3, 4, 0, 0], dtype)
    with np.errstate(divide="ignore"):
        expected = (a // b, a % b, a // 3, a % -3)
    got = interpret(pl.to_program(Q, R, Q3, R3), a, b)
    for g, x in zip(got, expected):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(g, x)


def test_int32_arithmetic_wraps_around() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "int32", name="A")
    C = pl.compute((n,), lambda i: A[i] * 3 + A[i], name="C")
    a = np.array([2**31 - 1, -2**31, 123456789], "int32")
    with np.errstate(over="ignore"):
        expected = a * np.int32(3) + a
    np.testing.assert_array_equal(interpret(pl.to_program(C), a), expected)


def _apply(op: UnaryKind, A: pl.Tensor):
    return lambda i: unary(op, A[i])


def test_unary_math_and_casts_keep_float32() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    ops = [UnaryKind.EXP, UnaryKind.LOG, UnaryKind.SQRT, UnaryKind.TANH, UnaryKind.ABS,
           UnaryKind.FLOOR, UnaryKind.NEG]
    outs = [pl.compute((n,), _apply(op, A), name=f"U{k}") for k, op in enumerate(ops)]
    T = pl.compute((n,), lambda i: A[i].astype("int32"), name="T")
    a = np.array([0.25, 1.5, 2.75, 9.0, 0.5], "float32") * np.float32(1.5)
    got = interpret(pl.to_program(*outs, T), a)
    expected = [np.exp(a), np.log(a), np.sqrt(a), np.tanh(a), np.abs(a), np.floor(a), -a]
    for g, x in zip(got, expected):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, x, rtol=1e-6)
    np.testing.assert_array_equal(got[-1], a.astype("int32"))


def test_cast_to_int_truncates_toward_zero() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    T = pl.compute((n,), lambda i: A[i].astype("int64"), name="T")
    a = np.array([-2.7, -0.5, 0.5, 2.7])
    np.testing.assert_array_equal(interpret(pl.to_program(T), a), [-2, 0, 0, 2])


def test_where_evaluates_only_the_chosen_branch() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    # A[i - 1] is out of bounds at i == 0, where the condition picks the other branch
    S = pl.compute((n,), lambda i: pl.where(i > 0, A[i - 1], 0.0), name="S")
    a = rand(6)
    np.testing.assert_array_equal(interpret(pl.to_program(S), a), np.r_[0, a[:-1]])


def test_conditions_minimum_and_maximum() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    C = pl.compute((n,), lambda i: pl.where((A[i] > -0.5) & ~(A[i] > 0.5), 1.0, 0.0), name="C")
    R = pl.compute((n,), lambda i: pl.maximum(A[i], 0.0), name="R")
    L = pl.compute((n,), lambda i: pl.minimum(A[i], 0.25), name="L")
    a = rand(13)
    a[3] = np.nan
    c, r, lo = interpret(pl.to_program(C, R, L), a)
    np.testing.assert_array_equal(c, np.where((a > -0.5) & ~(a > 0.5), 1.0, 0.0))
    np.testing.assert_array_equal(r, np.maximum(a, np.float32(0)))  # NaN propagates
    np.testing.assert_array_equal(lo, np.minimum(a, np.float32(0.25)))


# Programs built directly ---------------------------------------------------------------------

def test_in_place_stencil_runs_in_program_order() -> None:
    n = param("n")
    A = Buffer("A", (n, n), DType.FLOAT64, BufferRole.INOUT)
    i, j = Var("i"), Var("j")
    program = single_statement("[n] -> { S[i, j] : 1 <= i < n and 1 <= j < n }", ("i", "j"),
                               (A,), (i, j), A[i - 1, j] + A[i, j - 1])
    a = rand(6, 6, dtype="float64")
    expected = a.copy()
    for p in range(1, 6):
        for q in range(1, 6):
            expected[p, q] = expected[p - 1, q] + expected[p, q - 1]
    assert interpret(program, a) is None
    np.testing.assert_array_equal(a, expected)


def test_triangular_domain_leaves_the_rest_unwritten() -> None:
    n = param("n")
    A = Buffer("A", (n, n), DType.FLOAT32, BufferRole.INPUT)
    L = Buffer("L", (n, n), DType.FLOAT32, BufferRole.OUTPUT)
    i, j = Var("i"), Var("j")
    program = single_statement("[n] -> { S[i, j] : 0 <= j <= i < n }", ("i", "j"), (A, L),
                               (i, j), A[i, j] * 2.0)
    a = rand(5, 5)
    got = interpret(program, a)
    lower = np.tril(np.ones((5, 5), bool))
    np.testing.assert_array_equal(got[lower], (a * 2)[lower])
    assert np.isnan(got[~lower]).all()


def test_direct_reduction_statement() -> None:
    n = param("n")
    A = Buffer("A", (n,), DType.INT32, BufferRole.INPUT)
    M = Buffer("M", (1,), DType.INT32, BufferRole.INOUT)
    program = single_statement("[n] -> { S[k] : 0 <= k < n }", ("k",), (A, M), (0,),
                               A[Var("k")], reduction=ReduceKind.MIN)
    a, m = np.array([4, -3, 9, -8, 2], "int32"), np.array([0], "int32")
    interpret(program, a, m)
    assert m[0] == -8


# domain enumeration ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 6])
def test_points_of_a_triangle_in_lexicographic_order(size: int) -> None:
    program = single_statement("[n] -> { S[i, j] : 0 <= j <= i < n }", ("i", "j"),
                               (Buffer("A", (param("n"),), DType.FLOAT32, BufferRole.OUTPUT),),
                               (Var("i"),), 0.0)
    expected = [(i, j) for i in range(size) for j in range(i + 1)]
    assert points(program, program.statements[0], {"n": size}) == expected


def test_points_of_strided_and_non_convex_domains() -> None:
    text = ("[n, m] -> { S[i, j] : 0 <= i < n and 0 <= j < n and "
            "((exists e: j = 2e + m) or i = j + 1) }")
    program = single_statement(text, ("i", "j"), (Buffer("A", (param("n"),), DType.FLOAT32,
                                                         BufferRole.OUTPUT),), (Var("i"),), 0.0)
    got = points(program, program.statements[0], {"n": 7, "m": 1})
    expected = [(i, j) for i in range(7) for j in range(7) if (j - 1) % 2 == 0 or i == j + 1]
    assert got == expected


def test_points_errors() -> None:
    out = (Buffer("A", (param("n"),), DType.FLOAT32, BufferRole.OUTPUT),)
    big = single_statement("[n] -> { S[i, j] : 0 <= i, j < n }", ("i", "j"), out, (Var("i"),), 0.)
    with pytest.raises(PolyloopError, match="more than 100 points.*smaller sizes"):
        points(big, big.statements[0], {"n": 11}, limit=100)
    with pytest.raises(PolyloopError, match="size parameter.*n"):
        points(big, big.statements[0], {})
    unbounded = single_statement("[n] -> { S[i] : i >= n }", ("i",), out, (Var("i"),), 0.0)
    with pytest.raises(PolyloopError, match="unbounded"):
        points(unbounded, unbounded.statements[0], {"n": 3})


# out of bounds ---------------------------------------------------------------------------------

def test_out_of_bounds_read_is_reported() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i + 1], name="B")
    with pytest.raises(PolyloopError, match=r"statement 'B' at \(i=4\) reads A\[5\]"):
        interpret(pl.to_program(B), rand(5))


def test_negative_index_does_not_wrap_around() -> None:
    n = param("n")
    A = Buffer("A", (n,), DType.FLOAT32, BufferRole.INPUT)
    B = Buffer("B", (n,), DType.FLOAT32, BufferRole.OUTPUT)
    i = Var("i")
    program = single_statement("[n] -> { S[i] : 0 <= i < n }", ("i",), (A, B), (i,), A[i - 1])
    with pytest.raises(PolyloopError, match=r"at \(i=0\) reads A\[-1\]"):
        interpret(program, rand(4))


def test_out_of_bounds_write_is_reported() -> None:
    n = param("n")
    B = Buffer("B", (n,), DType.FLOAT32, BufferRole.OUTPUT)
    i = Var("i")
    program = single_statement("[n] -> { S[i] : 0 <= i <= n }", ("i",), (B,), (i,), 1.0)
    with pytest.raises(PolyloopError, match=r"statement 'S' at \(i=3\) writes B\[3\]"):
        interpret(program, n=3)


# arguments ------------------------------------------------------------------------------------

def _padded_copy() -> Program:
    n = pl.var("n")
    A = pl.placeholder((n + 2,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i + 1] + A[i + 2], name="B")
    return pl.to_program(B)


def test_size_inferred_from_an_affine_shape() -> None:
    a = rand(9)
    np.testing.assert_array_equal(interpret(_padded_copy(), a), a[1:-1] + a[2:])


def test_outputs_passed_in_are_written_in_place_and_not_returned() -> None:
    a, b = rand(6), np.zeros(4, "float32")
    assert interpret(_padded_copy(), a, b) is None
    np.testing.assert_array_equal(b, a[1:-1] + a[2:])
    c = np.zeros(4, "float32")
    assert interpret(_padded_copy(), B=c, A=a) is None
    np.testing.assert_array_equal(c, b)


def test_size_parameter_by_keyword() -> None:
    B = Buffer("B", (10,), DType.INT64, BufferRole.OUTPUT)
    i = Var("i")
    program = single_statement("[n] -> { S[i] : 0 <= i < n }", ("i",), (B,), (i,), i * i)
    with pytest.raises(ArgumentError, match="cannot infer size parameter.*n=..."):
        interpret(program)
    got = interpret(program, n=4)
    np.testing.assert_array_equal(got[:4], [0, 1, 4, 9])
    assert (got[4:] == np.iinfo(np.int64).min).all()  # the sentinel of unwritten elements


def test_several_outputs_return_a_tuple_in_argument_order() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    P = pl.compute((n,), lambda i: A[i] + 1.0, name="P")
    Q = pl.compute((n,), lambda i: A[i] * 2.0, name="Q")
    a = rand(3, dtype="float64")
    q, p = interpret(pl.to_program(Q, P), a)
    np.testing.assert_array_equal(p, a + 1)
    np.testing.assert_array_equal(q, a * 2)


@pytest.mark.parametrize("call, message", [
    (lambda p: interpret(p), "missing input array 'A'"),
    (lambda p: interpret(p, rand(5, dtype="float64")), "'A' must be float32"),
    (lambda p: interpret(p, rand(6), np.zeros(3, "float32")),
     r"'A' has shape \(6,\), expected \(5,\)"),
    (lambda p: interpret(p, rand(5), np.zeros(3, "float32"), rand(1)), "at most 2 arrays"),
    (lambda p: interpret(p, rand(5), C=rand(3)), "unknown argument 'C'"),
    (lambda p: interpret(p, rand(5), A=rand(5)), "both positionally and by name"),
    (lambda p: interpret(p, [1.0, 2.0, 3.0]), "must be a NumPy array"),
    (lambda p: interpret(p, rand(5), n=4), "'B' has shape|'A' has shape"),
    (lambda p: interpret(p, rand(5), n=2.5), "must be an integer"),
])
def test_argument_errors(call, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        call(_padded_copy())


def test_conflicting_bare_sizes() -> None:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    C = pl.compute((n,), lambda i: A[i] - B[i], name="C")
    with pytest.raises(ArgumentError, match="'n' is 3 from A.shape\\[0\\] but 4 from B"):
        interpret(pl.to_program(C), rand(3), rand(4))
