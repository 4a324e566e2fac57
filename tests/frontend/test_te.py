# SPDX-License-Identifier: Apache-2.0
"""The tensor-expression front end: what programs it builds, its typing rules, and the numbers
the built programs compute (always against NumPy, on random data at odd sizes)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.expr import ReduceKind, Var, same


def poisoned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    fill = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype=dtype)


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    a = rng.integers(-50, 50, size=shape).astype(dtype)
    a[a == 0] = 7   # safe divisors
    return a


# the Program ------------------------------------------------------------------------------------

def test_matmul_relu_program_structure():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    p = pl.to_program(D)
    assert p.params == ("n",)
    assert p.args == ("A", "B", "D")
    roles = {b.name: b.role for b in p.buffers}
    assert roles == {"A": pl.BufferRole.INPUT, "B": pl.BufferRole.INPUT,
                     "C": pl.BufferRole.TEMP, "D": pl.BufferRole.OUTPUT}
    assert [s.name for s in p.statements] == ["C_init", "C", "D"]
    init, update, relu = p.statements
    assert init.is_init and init.iters == ("i", "j") and init.value.value == 0.0
    assert update.iters == ("i", "j", "k") and update.reduction is ReduceKind.SUM
    assert update.domain == "[n] -> { C[i, j, k] : 0 <= i < n and 0 <= j < n and 0 <= k < n }"
    assert relu.domain == "[n] -> { D[i, j] : 0 <= i < n and 0 <= j < n }"
    assert str(update.value) == "A[i, k] * B[k, j]"


@pytest.mark.parametrize("reduce, identity", [(pl.sum, 0), (pl.max, -np.inf),
                                              (pl.min, np.inf)])
def test_a_reduction_is_an_init_with_its_identity_plus_an_update(reduce, identity):
    X = pl.placeholder((4, 6), "float64", name="X")
    k = pl.reduce_axis((1, 5), name="k")
    R = pl.compute((4,), lambda i: reduce(X[i, k], axis=k), name="R")
    init, update = pl.to_program(R).statements
    assert init.value.value == identity
    assert update.domain == "{ R[i, k] : 0 <= i < 4 and 1 <= k < 5 }"


def test_a_program_is_immutable():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    p = pl.to_program(pl.compute((n,), lambda i: A[i] + 1.0, name="B"))
    with pytest.raises(AttributeError):
        p.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.statements[0].value = A[0]  # type: ignore[misc]


# typing (NumPy's NEP 50 rules) ------------------------------------------------------------------

n_ = pl.var("n")
F32 = pl.placeholder((n_,), "float32", name="F32")
F64 = pl.placeholder((n_,), "float64", name="F64")
I32 = pl.placeholder((n_,), "int32", name="I32")
I64 = pl.placeholder((n_,), "int64", name="I64")
ARRAYS = {"F32": "float32", "F64": "float64", "I32": "int32", "I64": "int64"}
IDX = np.arange(13)

TYPING = [
    # (id, body, numpy reference on arrays {name: array}, expected dtype)
    ("f32*float", lambda i: F32[i] * 2.0, lambda a: a["F32"] * 2.0, "float32"),
    ("float-f32", lambda i: 1.5 - F32[i], lambda a: 1.5 - a["F32"], "float32"),
    ("f32+int", lambda i: F32[i] + 3, lambda a: a["F32"] + 3, "float32"),
    ("i32+index", lambda i: I32[i] + i, lambda a: a["I32"] + IDX.astype("int32"), "int32"),
    ("i32*int", lambda i: I32[i] * 3, lambda a: a["I32"] * 3, "int32"),
    ("i32*float", lambda i: I32[i] * 2.5, lambda a: a["I32"] * 2.5, "float64"),
    ("i32/int", lambda i: I32[i] / 2, lambda a: a["I32"] / 2, "float64"),
    ("i64//int", lambda i: I64[i] // 3, lambda a: a["I64"] // 3, "int64"),
    ("i32%neg", lambda i: I32[i] % -3, lambda a: a["I32"] % -3, "int32"),
    ("int//i32", lambda i: 100 // I32[i], lambda a: 100 // a["I32"], "int32"),
    ("f64%float", lambda i: F64[i] % 0.7, lambda a: a["F64"] % 0.7, "float64"),
    ("f32//float", lambda i: F32[i] // 0.3, lambda a: a["F32"] // np.float32(0.3), "float32"),
    ("f32+index", lambda i: F32[i] + i, lambda a: a["F32"] + IDX.astype("float32"), "float32"),
    ("index*2", lambda i: i * 2, lambda a: IDX * 2, "int64"),
    ("float const", lambda i: 1.5, lambda a: np.full(13, 1.5), "float64"),
    ("exp(i32)", lambda i: pl.exp(I32[i] * 0.01), lambda a: np.exp(a["I32"] * 0.01), "float64"),
    ("abs(i64)", lambda i: pl.abs(I64[i]), lambda a: np.abs(a["I64"]), "int64"),
    ("neg f32", lambda i: -F32[i], lambda a: -a["F32"], "float32"),
    ("cast", lambda i: F32[i].astype("float64") + F64[i], lambda a: a["F32"].astype("float64")
     + a["F64"], "float64"),
    ("cast int", lambda i: (F64[i] * 10.0).astype("int32") + I32[i],
     lambda a: (a["F64"] * 10.0).astype("int32") + a["I32"], "int32"),
    ("bool cast", lambda i: (F32[i] > 0).astype("int64") + I64[i],
     lambda a: (a["F32"] > 0).astype("int64") + a["I64"], "int64"),
    ("const dtype", lambda i: F64[i] + pl.const(2, "float64"), lambda a: a["F64"] + 2.0,
     "float64"),
    ("maximum i32", lambda i: pl.maximum(I32[i], 0), lambda a: np.maximum(a["I32"], 0), "int32"),
    ("minimum f32", lambda i: pl.minimum(F32[i], 0.25),
     lambda a: np.minimum(a["F32"], np.float32(0.25)), "float32"),
    ("where i32", lambda i: pl.where(F32[i] > 0, I32[i], 0),
     lambda a: np.where(a["F32"] > 0, a["I32"], np.int32(0)), "int32"),
]


@pytest.mark.parametrize("body, reference, dtype", [t[1:] for t in TYPING],
                         ids=[t[0] for t in TYPING])
def test_typing_follows_numpy_and_values_match(rng, body, reference, dtype):
    out = pl.compute((n_,), body, name="out")
    assert out.dtype == pl.DType(dtype)
    mod = pl.build(out)
    arrays = {name: random_array(rng, (13,), dt) for name, dt in ARRAYS.items()}
    expected = np.asarray(reference(arrays))
    assert expected.dtype == np.dtype(dtype)    # the rule is NumPy's own
    order = [b.name for b in mod.args if b.name != "out"]
    result = poisoned((13,), dtype)
    if order:
        mod(*[arrays[name] for name in order], result)
    else:
        mod(result)
    np.testing.assert_allclose(result, expected, rtol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("value, dtype", [(2.7, "int32"), (-2.7, "int64"), (2**31, "int32"),
                                          (2**40 + 5, "int32"), (-1, "int64"), (True, "float32"),
                                          (3, "float64"), (0.5, "bool")])
def test_astype_of_a_constant_converts_as_numpy_does(value, dtype):
    expected = np.asarray(value).astype(dtype)
    n = pl.var("n")
    out = pl.compute((n,), lambda i: pl.const(value).astype(dtype), name="out")
    assert out.dtype == pl.DType(dtype)
    result = pl.build(out)(n=3)
    np.testing.assert_array_equal(result, np.full(3, expected))


def test_tensors_of_different_dtypes_need_astype():
    with pytest.raises(pl.DTypeError, match=r"float32 and float64.*\.astype"):
        F32[0] + F64[0]
    with pytest.raises(pl.DTypeError, match=r"int32 and int64"):
        pl.maximum(I32[0], I64[0])
    with pytest.raises(pl.DTypeError, match="where"):
        pl.where(F32[0] > 0, F32[0], F64[0])
    with pytest.raises(pl.DTypeError, match="'<'"):
        F32[0] < I32[0]
    assert issubclass(pl.DTypeError, pl.PolyloopError)
    assert (F32[0] + F64[0].astype("float32")).dtype is pl.DType.FLOAT32


# conditions -------------------------------------------------------------------------------------

def test_conditions_combine_with_and_or_not(rng):
    n = pl.var("n")
    X = pl.placeholder((n,), "float32", name="X")
    Y = pl.compute((n,), lambda i: pl.where(
        ((X[i] > -0.5) & ~(X[i] > 0.5)) | (i == 0) | (i >= n - 2), X[i], -1.0), name="Y")
    mod = pl.build(Y)
    x = rng.standard_normal(31).astype("float32")
    y = poisoned((31,), "float32")
    mod(x, y)
    idx = np.arange(31)
    keep = ((x > -0.5) & ~(x > 0.5)) | (idx == 0) | (idx >= 29)
    np.testing.assert_array_equal(y, np.where(keep, x, np.float32(-1.0)))


def test_equality_builds_a_condition_not_a_python_bool(rng):
    n = pl.var("n")
    X = pl.placeholder((n,), "int32", name="X")
    Y = pl.compute((n,), lambda i: pl.where((X[i] == 3) | (X[i] != X[n - 1 - i]), 1, 0),
                   name="Y")
    x = rng.integers(0, 5, size=15).astype("int32")
    np.testing.assert_array_equal(pl.build(Y)(x), np.where((x == 3) | (x != x[::-1]), 1, 0))


def test_python_control_flow_on_expressions_is_refused_with_a_hint():
    with pytest.raises(pl.PolyloopError, match=r"pl\.where"):
        pl.compute((3,), lambda i: 1.0 if F32[i] > 0 else 0.0)
    with pytest.raises(pl.PolyloopError, match="compare it first"):
        pl.compute((3,), lambda i: pl.where(F32[i] & (F32[i] > 0), 1.0, 0.0))
    with pytest.raises(pl.PolyloopError, match="negates a condition"):
        pl.compute((3,), lambda i: pl.where(~I32[i], 1, 0))


# reductions -------------------------------------------------------------------------------------

@pytest.mark.parametrize("axes", ["list", "tuple"])
def test_sum_over_a_list_of_axes(rng, axes):
    n, m = pl.var("n"), pl.var("m")
    X = pl.placeholder((n, m, 3), "float64", name="X")
    k1 = pl.reduce_axis((0, m), name="k1")
    k2 = pl.reduce_axis(3, name="k2")
    S = pl.compute((n,), lambda i: pl.sum(X[i, k1, k2] * 2.0,
                                          axis=[k1, k2] if axes == "list" else (k1, k2)),
                   name="S")
    x = rng.standard_normal((7, 5, 3))
    s = poisoned((7,), "float64")
    pl.build(S)(x, s)
    np.testing.assert_allclose(s, 2.0 * x.sum(axis=(1, 2)), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "float64"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_and_min_reductions(rng, dtype, kind):
    n, m = pl.var("n"), pl.var("m")
    X = pl.placeholder((n, m), dtype, name="X")
    k = pl.reduce_axis((0, m), name="k")
    reduce = pl.max if kind == "max" else pl.min
    R = pl.compute((n,), lambda i: reduce(X[i, k], axis=k), name="R")
    x = random_array(rng, (9, 11), dtype)
    r = poisoned((9,), dtype)
    pl.build(R)(x, r)
    np.testing.assert_array_equal(r, x.max(axis=1) if kind == "max" else x.min(axis=1))


def test_reductions_over_an_empty_axis_give_the_identity():
    n, m = pl.var("n"), pl.var("m")
    X = pl.placeholder((n, m), "float64", name="X")
    k = pl.reduce_axis((0, m), name="k")
    S = pl.compute((n,), lambda i: pl.sum(X[i, k], axis=k), name="S")
    M = pl.compute((n,), lambda i: pl.max(X[i, k], axis=k), name="M")
    s, mx = pl.build([S, M])(np.zeros((3, 0)))
    np.testing.assert_array_equal(s, np.zeros(3))
    np.testing.assert_array_equal(mx, np.full(3, -np.inf))


def test_a_reduction_over_a_sub_range(rng):
    n = pl.var("n")
    X = pl.placeholder((n, n), "int32", name="X")
    k = pl.reduce_axis((1, n - 1), name="k")
    S = pl.compute((n,), lambda i: pl.sum(X[i, k] * X[k, i], axis=k), name="S")
    x = rng.integers(-9, 10, size=(10, 10)).astype("int32")
    s = pl.build(S)(x)
    assert s.dtype == np.int32
    np.testing.assert_array_equal(s, (x[:, 1:-1] * x.T[:, 1:-1]).sum(axis=1))


# data movement and elementwise functions ---------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (7, 3)])
def test_transpose(rng, shape):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    T = pl.compute((m, n), lambda i, j: A[j, i], name="T")
    a = rng.standard_normal(shape)
    t = poisoned(shape[::-1], "float64")
    pl.build(T)(a, t)
    np.testing.assert_array_equal(t, a.T)


def test_reversal_and_shifted_reads(rng):
    n = pl.var("n")
    A = pl.placeholder((n + 1,), "float32", name="A")
    R = pl.compute((n,), lambda i: A[n - i] - A[i], name="R")
    a = rng.standard_normal(12).astype("float32")
    np.testing.assert_array_equal(pl.build(R)(a), a[:0:-1] - a[:-1])


def test_concatenation_through_guarded_reads(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((m,), "float32", name="B")
    C = pl.compute((n + m,), lambda i: pl.where(i < n, A[i], B[i - n]), name="C")
    a, b = rng.standard_normal(7).astype("float32"), rng.standard_normal(4).astype("float32")
    c = poisoned((11,), "float32")
    pl.build(C)(a, b, c)
    np.testing.assert_array_equal(c, np.concatenate([a, b]))


def test_size_parameters_as_values(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: pl.where(i < n / 2, A[i] + n, A[i] * m), name="B")
    a = rng.standard_normal(9).astype("float32")
    b = pl.build(B)(a, m=3)
    assert b.dtype == np.float32
    idx = np.arange(9)
    np.testing.assert_allclose(b, np.where(idx < 4.5, a + np.float32(9), a * np.float32(3)),
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_math_functions(rng, dtype):
    n = pl.var("n")
    X = pl.placeholder((n,), dtype, name="X")
    Y = pl.compute((n,), lambda i: pl.exp(X[i]) + pl.log(pl.abs(X[i]) + 1.0)
                   + pl.sqrt(pl.abs(X[i])) * pl.tanh(X[i]), name="Y")
    x = rng.standard_normal(29).astype(dtype)
    y = poisoned((29,), dtype)
    pl.build(Y)(x, y)
    one = np.asarray(1.0, dtype)
    terms = [np.exp(x), np.log(np.abs(x) + one), np.sqrt(np.abs(x)) * np.tanh(x)]
    expected = terms[0] + terms[1] + terms[2]
    assert expected.dtype == np.dtype(dtype)
    # The terms may cancel (a result near 0 from terms near 1): the error allowed is relative
    # to the terms' magnitude, not to the sum's.
    eps = 1e-6 if dtype == "float32" else 1e-13
    bound = eps * sum(np.abs(t) for t in terms)
    assert np.all(np.abs(y - expected) <= bound), np.abs(y - expected) / bound


def test_compute_names_its_axes_after_the_lambda_parameters():
    p = pl.to_program(pl.compute((3, 4), lambda row, col: F32[row + col], name="G"))
    assert p.statements[0].iters == ("row", "col")
    q = pl.to_program(pl.compute((3, 4), lambda *ix: F32[ix[0]], name="H"))
    assert q.statements[0].iters == ("i0", "i1")


@pytest.mark.parametrize("build", [
    lambda i: ((F32[i] > 0) & ~(F32[i] > 1)) | (i == 0),
    lambda i: (F32[i] > 0) | ((F32[i] < 1) & (i >= 2)),
    lambda i: -(F32[i] + 1.0) * 2.0 - (F32[i] - (F32[i] - 3.0)),
    lambda i: pl.where((I32[i] // 2 == I32[i] % 3) == (i < 3), pl.exp(F32[i]), -F32[i]),
    lambda i: pl.maximum(F64[i].astype("float32"), 0.5) / (F32[i] * F32[i]),
], ids=["and-or-not", "or-of-and", "arithmetic", "where", "cast"])
def test_printed_expressions_read_back_as_the_same_expression(build):
    """The text form is Python that means what the expression means (``&`` binds tightly)."""
    i = Var("i")
    e = build(i)
    env = {"F32": F32, "F64": F64, "I32": I32, "i": i, "where": pl.where, "exp": pl.exp,
           "max": pl.maximum, "float32": lambda x: x.astype("float32")}
    assert same(eval(str(e), env), e), str(e)


def test_expressions_compare_structurally_with_same():
    assert same(F32[0] * 2.0, F32[0] * 2.0)
    assert not same(F32[0] * 2.0, F32[0] * 3.0)
