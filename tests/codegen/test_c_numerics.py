# SPDX-License-Identifier: Apache-2.0
"""Generated C computes NumPy's answer: compiled with gcc, called through ctypes, at odd sizes.

Outputs start as poison (NaN, or a sentinel integer) so that a missed element shows.
"""
import numpy as np
import pytest

from polyloop.ir.expr import BinOpKind, ReduceKind, UnaryKind, Var, binop, select, unary
from polyloop.ir.loops import Block, If, Kernel, LoopKind, Store
from polyloop.ir.program import MemScope

from .irbuild import F32, F64, I32, I64, OUT, TEMP, buf, c, loop, param, poison

m, n, k = param("m"), param("n"), param("k")
i, j, kk = Var("i"), Var("j"), Var("k")


@pytest.mark.parametrize("size", [0, 1, 37])
def test_vector_add(run_kernel, rng, size):
    A, B, C = buf("A", (n,), F32), buf("B", (n,), F32), buf("C", (n,), F32, OUT)
    kernel = Kernel("vadd", (A, B, C), ("n",),
                    (), loop("i", n, Store("C", (i,), A[i] + B[i]), LoopKind.VECTORIZED))
    a, b = rng.random(size, dtype="float32"), rng.random(size, dtype="float32")
    out = poison((size,), "float32")
    assert run_kernel(kernel, [a, b, out], [size]) == 0
    np.testing.assert_array_equal(out, a + b)


def matmul_kernel() -> Kernel:
    """C = A @ B: an init nest, then i (parallel), k, j (vectorized) with a sum update.

    The reduction loop is called k like the size parameter k: the C names must differ.
    """
    A, B, C = buf("A", (m, k), F32), buf("B", (k, n), F32), buf("C", (m, n), F32, OUT)
    init = loop("i", m, loop("j", n, Store("C", (i, j), c(0.0, F32)), LoopKind.VECTORIZED))
    update = loop("i", m, loop("k", k, loop(
        "j", n, Store("C", (i, j), A[i, kk] * B[kk, j], ReduceKind.SUM), LoopKind.VECTORIZED)),
        LoopKind.PARALLEL)
    return Kernel("matmul", (A, B, C), ("m", "n", "k"), (), Block((init, update)))


@pytest.mark.parametrize("sizes", [(37, 29, 23), (1, 64, 5)])
def test_matmul_with_parallel_and_vectorized_loops(run_kernel, rng, sizes):
    ms, ns, ks = sizes
    a, b = rng.random((ms, ks), dtype="float32"), rng.random((ks, ns), dtype="float32")
    out = poison((ms, ns), "float32")
    assert run_kernel(matmul_kernel(), [a, b, out], [ms, ns, ks]) == 0
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)


def divmod_kernel(dtype) -> Kernel:
    A, B = buf("A", (n,), dtype), buf("B", (n,), dtype)
    Q, R = buf("Q", (n,), dtype, OUT), buf("R", (n,), dtype, OUT)
    body = Block((Store("Q", (i,), A[i] // B[i]), Store("R", (i,), A[i] % B[i])))
    return Kernel("divmod", (A, B, Q, R), ("n",), (), loop("i", n, body))


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_floor_division_and_modulo_follow_python(run_kernel, rng, dtype):
    lo = np.iinfo(dtype).min
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (-6, 3), (6, -3), (0, -5), (5, 0), (-5, 0),
             (lo, -1), (lo, 1), (lo, 7), (-1, lo)]
    pairs += [(int(x), int(y) or 3) for x, y in rng.integers(-1000, 1000, (24, 2))]
    a, b = (np.array(col, dtype=dtype) for col in zip(*pairs))
    q, r = poison(a.shape, dtype), poison(a.shape, dtype)
    assert run_kernel(divmod_kernel(I32 if dtype == "int32" else I64),
                      [a, b, q, r], [len(a)]) == 0
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(a, b))  # x // 0 is 0, as in NumPy
        np.testing.assert_array_equal(r, np.remainder(a, b))
    for x, y, qq, rr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
        if y != 0 and (x, y) != (lo, -1):
            assert (qq, rr) == (x // y, x % y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_division_and_modulo_follow_numpy(run_kernel, rng, dtype):
    pairs = [(1.0, 0.1), (7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (0.0, -3.0),
             (-0.0, 3.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (np.inf, 2.0), (2.0, np.inf),
             (-2.0, np.inf), (np.nan, 1.0), (1.0, np.nan), (1e-30, 1.0), (-1e-30, 1.0)]
    pairs += [tuple(row) for row in rng.normal(0, 10, (24, 2))]
    a, b = (np.array(col, dtype=dtype) for col in zip(*pairs))
    q, r = poison(a.shape, dtype), poison(a.shape, dtype)
    assert run_kernel(divmod_kernel(F32 if dtype == "float32" else F64), [a, b, q, r],
                      [len(a)]) == 0
    with np.errstate(all="ignore"):
        expected_q, expected_r = np.floor_divide(a, b), np.remainder(a, b)
    np.testing.assert_array_equal(q, expected_q)
    np.testing.assert_array_equal(r, expected_r)
    np.testing.assert_array_equal(np.signbit(q), np.signbit(expected_q))  # -0.0 stays -0.0
    np.testing.assert_array_equal(np.signbit(r), np.signbit(expected_r))


def test_index_arithmetic_with_floor_division_by_constants(run_kernel):
    out = buf("O", (n,), I64, OUT)
    value = (i - 17) // 4 * 100 + (i - 17) % 4 + (5 - i) // -3
    kernel = Kernel("index_math", (out,), ("n",), (), loop("i", n, Store("O", (i,), value)))
    o = poison((41,), "int64")
    assert run_kernel(kernel, [o], [41]) == 0
    assert o.tolist() == [(x - 17) // 4 * 100 + (x - 17) % 4 + (5 - x) // -3 for x in range(41)]


@pytest.mark.parametrize("kind", [LoopKind.VECTORIZED, LoopKind.SERIAL])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_minimum_and_maximum_propagate_nan_like_numpy(run_kernel, rng, dtype, kind):
    d = {"float32": F32, "float64": F64, "int32": I32}[dtype]
    A, B = buf("A", (n,), d), buf("B", (n,), d)
    Lo, Hi = buf("Lo", (n,), d, OUT), buf("Hi", (n,), d, OUT)
    body = Block((Store("Lo", (i,), binop(BinOpKind.MIN, A[i], B[i])),
                  Store("Hi", (i,), binop(BinOpKind.MAX, A[i], B[i]))))
    kernel = Kernel("minmax", (A, B, Lo, Hi), ("n",), (), loop("i", n, body, kind))
    a, b = (rng.integers(-50, 50, 37).astype(dtype) for _ in range(2))
    if d.is_float:
        a[3], b[5], a[7], b[7] = np.nan, np.nan, np.nan, np.nan
    lo, hi = poison(a.shape, dtype), poison(a.shape, dtype)
    assert run_kernel(kernel, [a, b, lo, hi], [37]) == 0
    np.testing.assert_array_equal(lo, np.minimum(a, b))
    np.testing.assert_array_equal(hi, np.maximum(a, b))


def test_max_reduction_from_minus_infinity(run_kernel, rng):
    A, M = buf("A", (m, n), F32), buf("M", (m,), F32, OUT)
    body = loop("i", m, Block((
        Store("M", (i,), c(float("-inf"), F32)),
        loop("j", n, Store("M", (i,), A[i, j], ReduceKind.MAX)))))
    a = rng.normal(size=(9, 37)).astype("float32")
    a[4, 11] = np.nan
    out = poison((9,), "float32")
    assert run_kernel(Kernel("rowmax", (A, M), ("m", "n"), (), body), [a, out], [9, 37]) == 0
    np.testing.assert_array_equal(out, a.max(axis=1))


def test_select_as_leaky_relu(run_kernel, rng):
    A, B = buf("A", (n,), F64), buf("B", (n,), F64, OUT)
    body = loop("i", n, Store("B", (i,), select(A[i] > 0.0, A[i], A[i] * 0.01)))
    a, out = rng.normal(size=37), poison((37,), "float64")
    assert run_kernel(Kernel("leaky", (A, B), ("n",), (), body), [a, out], [37]) == 0
    np.testing.assert_array_equal(out, np.where(a > 0, a, a * 0.01))


MATH = [(UnaryKind.EXP, np.exp), (UnaryKind.LOG, np.log), (UnaryKind.SQRT, np.sqrt),
        (UnaryKind.TANH, np.tanh), (UnaryKind.ABS, np.abs), (UnaryKind.FLOOR, np.floor)]


@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-6), ("float64", 4e-15)])  # a few ulp
def test_math_functions(run_kernel, rng, dtype, rtol):
    d = F32 if dtype == "float32" else F64
    A, O = buf("A", (n,), d), buf("O", (len(MATH), n), d, OUT)
    stores = [Store("O", (c(row, I64), i), unary(op, A[i])) for row, (op, _) in enumerate(MATH)]
    kernel = Kernel("math", (A, O), ("n",), (), loop("i", n, Block(tuple(stores))))
    a = rng.uniform(0.01, 20, 37).astype(dtype)
    out = poison((len(MATH), 37), dtype)
    assert run_kernel(kernel, [a, out], [37]) == 0
    for row, (op, fn) in enumerate(MATH):
        np.testing.assert_allclose(out[row], fn(a), rtol=rtol, err_msg=op.value)


def test_integer_abs_casts_and_wide_constants(run_kernel, rng):
    A, X = buf("A", (n,), I64), buf("X", (n,), F32)
    O, T = buf("O", (n,), I64, OUT), buf("T", (n,), I32, OUT)
    body = Block((Store("O", (i,), unary(UnaryKind.ABS, A[i]) + c(2**40, I64)),
                  Store("T", (i,), X[i].astype("int32") + unary(UnaryKind.ABS, c(-3, I32)))))
    a = rng.integers(-2**50, 2**50, 37)
    x = rng.uniform(-100, 100, 37).astype("float32")
    o, t = poison((37,), "int64"), poison((37,), "int32")
    kernel = Kernel("casts", (A, X, O, T), ("n",), (), loop("i", n, body))
    assert run_kernel(kernel, [a, x, o, t], [37]) == 0
    np.testing.assert_array_equal(o, np.abs(a) + 2**40)
    np.testing.assert_array_equal(t, x.astype("int32") + 3)


def test_if_else_chain(run_kernel):
    A = buf("A", (n,), I64, OUT)
    chain = If(i < 3, Store("A", (i,), i * 10),
               If((i % 2 == 0) & (i < 30), Store("A", (i,), c(-1, I64)), Store("A", (i,), -i)))
    out = poison((37,), "int64")
    assert run_kernel(Kernel("branches", (A,), ("n",), (), loop("i", n, chain)), [out], [37]) == 0
    assert out.tolist() == [x * 10 if x < 3 else -1 if x % 2 == 0 and x < 30 else -x
                            for x in range(37)]


@pytest.mark.parametrize("shape", [(n,), (64,), (5000, 4)])  # heap, stack, heap (80 KB)
def test_temporaries_on_stack_and_heap(run_kernel, rng, shape):
    A, B = buf("A", (n,), F32), buf("B", (n,), F32, OUT)
    T = buf("T", shape, F32, TEMP)
    extra = (c(0, I64),) * (len(shape) - 1)
    body = Block((loop("i", n, Store("T", (i, *extra), A[i] * 2.0)),
                  loop("i", n, Store("B", (i,), T[(n - 1 - i, *extra)] + 1.0))))
    a, out = rng.random(37, dtype="float32"), poison((37,), "float32")
    assert run_kernel(Kernel("temps", (A, B), ("n",), (T,), body), [a, out], [37]) == 0
    np.testing.assert_array_equal(out, a[::-1] * 2 + 1)


def test_local_temporary_is_private_to_each_parallel_iteration(run_kernel, rng):
    A, B = buf("A", (n, 8), F32), buf("B", (n, 8), F32, OUT)
    T = buf("T", (8,), F32, TEMP, MemScope.LOCAL)
    body = loop("i", n, Block((
        loop("j", 8, Store("T", (j,), A[i, j] * 2.0)),
        loop("j", 8, Store("B", (i, j), T[7 - j])))), LoopKind.PARALLEL)
    a, out = rng.random((301, 8), dtype="float32"), poison((301, 8), "float32")
    assert run_kernel(Kernel("private", (A, B), ("n",), (T,), body), [a, out], [301]) == 0
    np.testing.assert_array_equal(out, a[:, ::-1] * 2)


def test_sum_into_a_0d_output(run_kernel, rng):
    A, S = buf("A", (n,), F64), buf("S", (), F64, OUT)
    body = Block((Store("S", (), c(0.0, F64)), loop("i", n, Store("S", (), A[i], ReduceKind.SUM))))
    a, out = rng.random(37), poison((), "float64")
    assert run_kernel(Kernel("total", (A, S), ("n",), (), body), [a, out], [37]) == 0
    assert out == pytest.approx(a.sum(), rel=1e-12)
