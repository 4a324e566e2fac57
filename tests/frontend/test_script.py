# SPDX-License-Identifier: Apache-2.0
"""``@pl.script``: plain Python loops parsed into a Program that computes what Python would.

Every numeric test runs the same function body as plain Python/NumPy (the decorator only reads
the source) and compares: the compiled module and the reference interpreter must agree with it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.expr import ReduceKind
from polyloop.ir.program import BufferRole
from polyloop.testing import interpret
from polybench_scripts import fdtd_2d  # tests/ is on sys.path (rootdir conftest)
from seed_scripts import mm_relu, stencil

HALF = 0.5


def run_both(program, *arrays, **sizes):
    """(compiled result, interpreted result) on copies of the arrays (in-place arguments)."""
    built = [a.copy() for a in arrays]
    interp = [a.copy() for a in arrays]
    pl.build(program)(*built, **sizes)
    interpret(program, *interp, **sizes)
    return built, interp


# -- the stencil ----------------------------------------------------------------------------

def stencil_loops(A, n):
    for i in range(1, n):
        for j in range(1, n):
            A[i, j] = A[i - 1, j] + A[i, j - 1]


def test_stencil_structure():
    assert isinstance(stencil, pl.Program)
    assert stencil.params == ("n",)
    assert stencil.buffer("A").role is BufferRole.INOUT
    (s,) = stencil.statements
    assert s.iters == ("i", "j")
    assert s.domain == "[n] -> { A[i, j] : 1 <= i < n and 1 <= j < n }"
    assert str(s.value) == "A[i - 1, j] + A[i, j - 1]"


@pytest.mark.parametrize("n", [1, 2, 7, 13])
def test_stencil_matches_python(n, rng):
    a = rng.standard_normal((n, n))
    expected = a.copy()
    stencil_loops(expected, n)
    built, interp = run_both(stencil, a)
    np.testing.assert_allclose(built[0], expected, rtol=1e-12)
    np.testing.assert_allclose(interp[0], expected, rtol=1e-12)


# -- seed 001: NumPy-loop versions --------------------------------------------------------------------

@pl.script
def lnumpy_mm_relu(A: pl.Buffer[(128, 128), "float32"], B: pl.Buffer[(128, 128), "float32"],
                   C: pl.Buffer[(128, 128), "float32"]):
    Y = np.empty((128, 128), dtype="float32")
    for i in range(128):
        for j in range(128):
            for k in range(128):
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(128):
        for j in range(128):
            C[i, j] = max(Y[i, j], 0)


def test_mm_relu_structure():
    p = lnumpy_mm_relu
    assert [s.name for s in p.statements] == ["Y", "Y_1", "C"]
    assert p.buffer("Y").role is BufferRole.TEMP
    assert p.buffer("C").role is BufferRole.OUTPUT
    assert p.buffer("A").role is BufferRole.INPUT
    assert p.statement("Y_1").reduction is ReduceKind.SUM
    assert "k = 0" in p.statement("Y").domain
    # Y and Y_1 share the i, j, k loops; C has its own nest
    assert dict(p.nesting) == {"Y": (0, 0, 0, 0), "Y_1": (0, 0, 0, 1), "C": (1, 0, 0)}


def test_seed_mm_relu_matches_numpy(rng):
    a = rng.standard_normal((128, 128)).astype("float32")
    b = rng.standard_normal((128, 128)).astype("float32")
    c = pl.build(lnumpy_mm_relu)(a, b)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n, l, m", [(1, 1, 1), (5, 7, 3), (13, 11, 17)])
def test_mm_relu_at_odd_sizes(n, l, m, rng):
    a = rng.standard_normal((n, l)).astype("float32")
    b = rng.standard_normal((l, m)).astype("float32")
    expected = np.maximum(a @ b, 0)
    c_built = pl.build(mm_relu)(a, b)
    c_interp = interpret(mm_relu, a, b)
    np.testing.assert_allclose(c_built, expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c_interp, expected, rtol=1e-4, atol=1e-5)


@pl.script
def lnumpy_mm_relu_v2(A: pl.Buffer[(16, 128, 128), "float32"],
                      B: pl.Buffer[(16, 128, 128), "float32"],
                      C: pl.Buffer[(16, 128, 128), "float32"]):
    Y = np.empty((16, 128, 128), dtype="float32")
    for n in range(16):
        for i in range(128):
            for j in range(128):
                for k in range(128):
                    if k == 0:
                        Y[n, i, j] = 0
                    Y[n, i, j] = Y[n, i, j] + A[n, i, k] * B[n, k, j]
    for n in range(16):
        for i in range(128):
            for j in range(128):
                C[n, i, j] = max(Y[n, i, j], 0)


@pl.script
def bmm_relu(A: pl.Buffer[("b", "n", "l"), "float32"], B: pl.Buffer[("b", "l", "m"), "float32"],
             C: pl.Buffer[("b", "n", "m"), "float32"]):
    Y = pl.alloc(("b", "n", "m"), "float32")
    for q in range(b):  # noqa: F821
        for i in range(n):  # noqa: F821
            for j in range(m):  # noqa: F821
                for k in range(l):  # noqa: F821
                    if k == 0:
                        Y[q, i, j] = 0
                    Y[q, i, j] = Y[q, i, j] + A[q, i, k] * B[q, k, j]
    for q in range(b):  # noqa: F821
        for i in range(n):  # noqa: F821
            for j in range(m):  # noqa: F821
                C[q, i, j] = max(Y[q, i, j], 0)


def test_seed_bmm_relu_matches_numpy(rng):
    a = rng.standard_normal((16, 128, 128)).astype("float32")
    b = rng.standard_normal((16, 128, 128)).astype("float32")
    c = pl.build(lnumpy_mm_relu_v2)(a, b)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_bmm_relu_at_odd_sizes(rng):
    a = rng.standard_normal((3, 5, 7)).astype("float32")
    b = rng.standard_normal((3, 7, 9)).astype("float32")
    expected = np.maximum(a @ b, 0)
    np.testing.assert_allclose(pl.build(bmm_relu)(a, b), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(interpret(bmm_relu, a, b), expected, rtol=1e-4, atol=1e-5)


def convol_1(A, B, C):
    for i in range(1):
        for j in range(2):
            for k in range(6):
                for l in range(6):
                    for m in range(3):
                        for n in range(3):
                            C[i, j, k, l] += A[i, i, k + m, l + n] * B[j, i, m, n]


@pl.script
def convol(A: pl.Buffer[(1, 1, 8, 8), "int64"], B: pl.Buffer[(2, 1, 3, 3), "int64"],
           C: pl.Buffer[(1, 2, 6, 6), "int64"]):
    for i in range(1):
        for j in range(2):
            for k in range(6):
                for l in range(6):
                    for m in range(3):
                        for n in range(3):
                            C[i, j, k, l] += A[i, i, k + m, l + n] * B[j, i, m, n]


def test_seed_conv_matches_numpy():
    data = np.arange(64, dtype="int64").reshape(1, 1, 8, 8)
    weight = np.arange(18, dtype="int64").reshape(2, 1, 3, 3)
    expected = np.zeros((1, 2, 6, 6), "int64")
    convol_1(data, weight, expected)
    assert convol.buffer("C").role is BufferRole.INOUT   # += reads what the caller passed
    assert len(convol.statements[0].iters) == 6
    built, interp = run_both(convol, data, weight, np.zeros((1, 2, 6, 6), "int64"))
    np.testing.assert_array_equal(built[2], expected)
    np.testing.assert_array_equal(interp[2], expected)


# -- imperfect nests, conditions, bounds ----------------------------------------------------------------

def fdtd_loops(ex, ey, hz, fict, tmax, nx, ny):
    for t in range(tmax):
        for j in range(ny):
            ey[0, j] = fict[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])


def test_time_loop_interleaves_statements(rng):
    nx, ny, tmax = 9, 7, 5
    arrays = [rng.standard_normal((nx, ny)) for _ in range(3)] + [rng.standard_normal(tmax)]
    expected = [a.copy() for a in arrays]
    fdtd_loops(*expected, tmax, nx, ny)
    assert [pos[0] for _, pos in fdtd_2d.nesting] == [0, 0, 0, 0]   # one time loop
    assert fdtd_2d.assumptions == "[nx, ny, tmax] -> { : (nx >= 1) }"
    built, interp = run_both(fdtd_2d, *arrays)
    for got in (built, interp):
        for g, e in zip(got[:3], expected[:3]):
            np.testing.assert_allclose(g, e, rtol=1e-12)


@pl.script
def lower_triangle(A: pl.Buffer[("n", "n"), "float64"], L: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):  # noqa: F821
        for j in range(n):  # noqa: F821
            if j <= i:
                L[i, j] = math.exp(A[i, j]) * HALF
            else:
                L[i, j] = 0.0


@pl.script
def banded(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
    for i in range(A.shape[0]):
        B[i] = 0.0
        for j in range(max(0, i - 2), min(n, i + 3)):  # noqa: F821
            B[i] += A[j] ** 2
        for j in range(0, i, 3):
            B[i] -= pl.sqrt(abs(A[j]))


def test_if_else_and_math(rng):
    a = rng.standard_normal((9, 9))
    expected = np.where(np.tri(9, dtype=bool), np.exp(a) * HALF, 0.0)
    np.testing.assert_allclose(pl.build(lower_triangle)(a), expected, rtol=1e-12)
    np.testing.assert_allclose(interpret(lower_triangle, a), expected, rtol=1e-12)
    assert lower_triangle.buffer("L").role is BufferRole.OUTPUT


@pytest.mark.parametrize("n", [1, 4, 11])
def test_min_max_bounds_steps_and_shape_lookups(n, rng):
    a = rng.standard_normal(n)
    expected = np.zeros(n)
    for i in range(n):
        expected[i] = sum(a[j] ** 2 for j in range(max(0, i - 2), min(n, i + 3)))
        expected[i] -= sum(math.sqrt(abs(a[j])) for j in range(0, i, 3))
    np.testing.assert_allclose(pl.build(banded)(a), expected, rtol=1e-12)
    np.testing.assert_allclose(interpret(banded, a), expected, rtol=1e-12)
    assert banded.statement("B_1").reduction is ReduceKind.SUM
    assert banded.statement("B_2").reduction is ReduceKind.SUM


@pl.script
def row_max(A: pl.Buffer[("n", "m"), "float32"], M: pl.Buffer[("n",), "float32"]):
    assert m >= 1  # noqa: F821
    for i in range(n):  # noqa: F821
        M[i] = A[i, 0]
        for j in range(1, m):  # noqa: F821
            M[i] = max(M[i], A[i, j])


def test_max_reduction(rng):
    a = rng.standard_normal((6, 5)).astype("float32")
    assert row_max.statement("M_1").reduction is ReduceKind.MAX
    np.testing.assert_array_equal(pl.build(row_max)(a), a.max(axis=1))
    np.testing.assert_array_equal(interpret(row_max, a), a.max(axis=1))


def test_source_text_and_dependences():
    prog = pl.script("""
def prefix(A: pl.Buffer[("n",), "float32"]):
    for i in range(1, n):
        A[i] += A[i - 1]
""")
    assert prog.name == "prefix"
    text = str(pl.dependences(prog))
    assert "RAW A -> A on A" in text and "distance (1,)" in text


# -- errors ---------------------------------------------------------------------------------------------

BAD = {
    "while": ("while n > 0:\n        A[0] = 0.0", "while loop is not supported"),
    "unknown_call": ("for i in range(n):\n        A[i] = foo(A[i])", "unknown function 'foo'"),
    "nonaffine_bound": ("for i in range(n):\n        for j in range(i * i):\n            "
                        "A[j] = 0.0", "loop bound must be affine"),
    "data_if": ("for i in range(n):\n        if A[i] > 0:\n            A[i] = 0.0",
                "if conditions must be affine"),
    "scalar": ("s += 1.0", "'s' is not a scalar variable of this function"),
    "step": ("for i in range(0, n, n):\n        A[i] = 0.0", "non-zero integer constant"),
    "chain": ("for i in range(n):\n        A[i] = A[0] = A[i] + 1.0", "chained assignment"),
    "rank": ("for i in range(n):\n        A[i, i] = 0.0", "has 1 dimensions, indexed with 2"),
    "unknown_name": ("for i in range(m):\n        A[i] = 0.0", "unknown name 'm'"),
    "slice": ("A[0:2] = 0.0", "slices are not supported"),
    "break": ("for i in range(n):\n        break", "break is not supported"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_parse_errors_name_file_and_line(case):
    body, message = BAD[case]
    text = f'def bad(A: pl.Buffer[("n",), "float32"]):\n    {body}\n'
    with pytest.raises(pl.ParseError, match=message) as err:
        pl.script(text)
    assert "<script>:" in str(err.value)
    line = int(str(err.value).split(":")[1])
    assert 2 <= line <= 4


def test_missing_annotation_points_at_this_file():
    with pytest.raises(pl.ParseError, match="needs an annotation") as err:
        @pl.script
        def f(A):
            A[0] = 1.0
    assert "test_script.py:" in str(err.value)


def test_bad_annotation():
    with pytest.raises(pl.ParseError, match="pl.Buffer"):
        pl.script("def f(A: 3):\n    A[0] = 1\n")


def test_alloc_outside_a_script_is_an_error():
    with pytest.raises(pl.PolyloopError, match="inside a @pl.script"):
        pl.alloc((4,), "float32")


def test_buffer_constructor_still_works():
    b = pl.Buffer("X", (), pl.DType.FLOAT32, pl.BufferRole.INPUT)
    assert b.name == "X"


@pl.script
def valid_conv(X: pl.Buffer[("H", "W"), "float32"], B: pl.Buffer[("K", "K"), "float32"],
               C: pl.Buffer[("H - K + 1", "W - K + 1"), "float32"]):
    for h in range(H - K + 1):  # noqa: F821
        for w in range(W - K + 1):  # noqa: F821
            C[h, w] = 0.0
            for kh in range(K):  # noqa: F821
                for kw in range(K):  # noqa: F821
                    C[h, w] += X[h + kh, w + kw] * B[kh, kw]


def test_shapes_may_be_affine_expressions_of_sizes(rng):
    assert valid_conv.params == ("H", "W", "K")
    assert [str(d) for d in valid_conv.buffer("C").shape] == ["H - K + 1", "W - K + 1"]
    x = rng.standard_normal((11, 9)).astype("float32")
    b = rng.standard_normal((3, 3)).astype("float32")
    c = pl.build(valid_conv)(x, b)
    assert c.shape == (9, 7)
    np.testing.assert_allclose(c, interpret(valid_conv, x, b), rtol=1e-5, atol=1e-6)


def test_bad_size_text():
    with pytest.raises(pl.ParseError, match="size 'n \\* m'"):
        pl.script('def f(A: pl.Buffer[("n * m",), "float32"]):\n    A[0] = 1.0\n')
