# SPDX-License-Identifier: Apache-2.0
"""``@pl.script`` constructs beyond buffer elements: scalar variables, downward and stepped
loops, scalar arguments, ``**``/pow, chained assignment and helpers of the module. Each is
checked against Python running the same function, with outputs poisoned with NaN."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.program import MemScope

F = "float64"


def row_sums(n: int, m: int, alpha: float, A: pl.Buffer[("n", "m"), F], y: pl.Buffer[("n",), F]):
    for i in range(n):
        acc = 0.0
        for j in range(m):
            acc += A[i, j]
        y[i] = alpha * acc


def running(n: int, A: pl.Buffer[("n",), F], y: pl.Buffer[("n",), F]):
    total = 0.0
    for i in range(n):
        total = total + A[i]
        y[i] = total


def backwards(n: int, A: pl.Buffer[("n",), F], y: pl.Buffer[("n",), F]):
    for i in range(n - 1, -1, -1):
        y[i] = A[i]
        if i < n - 1:
            y[i] = y[i] + 0.5 * y[i + 1]
    for i in range(n - 1, 0, -3):
        y[i] = y[i] * 2.0
    for i in range(1, n, 2):
        y[i] = y[i] - 1.0


def square(x):
    return x * x


def poly(x, c):
    t = square(x) + c
    return t * x


def powers(n: int, A: pl.Buffer[("n",), F], y: pl.Buffer[("n", 6), F]):
    for i in range(n):
        y[i, 0] = A[i] ** 3
        y[i, 1] = A[i] ** -2
        y[i, 2] = pow(A[i], 0.5)
        y[i, 3] = math.pow(2.0, A[i])
        y[i, 4] = y[i, 5] = poly(A[i], 1.5)
        y[i, 5] **= 2


def _call(fn, *args):
    return fn(*args)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_scalar_accumulator_matches_python_and_is_expanded(n, rng):
    prog = pl.script(row_sums)
    acc = prog.buffer("acc")
    assert acc.scope is MemScope.LOCAL and acc.dtype is DType.FLOAT64
    assert [str(d) for d in acc.shape] == ["n"]     # one element per i: i carries nothing
    a = rng.standard_normal((n, 5))
    expected = np.full(n, np.nan)
    row_sums(n, 5, 1.5, a, expected)
    got = np.full(n, np.nan)
    pl.build(prog)(1.5, a, got)   # int arguments are sizes: not passed
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_expanded_scalar_frees_the_outer_loop(rng):
    sch = pl.Schedule(pl.script(row_sums))
    i = sch.get_loops(sch.get_block("acc"))[0]
    sch.parallel(i)
    a = rng.standard_normal((9, 3))
    got = np.full(9, np.nan)
    pl.build(sch)(2.0, a, got)
    np.testing.assert_allclose(got, 2.0 * a.sum(axis=1), rtol=1e-12)


def test_scalar_carried_across_iterations_stays_serial(rng):
    prog = pl.script(running)
    assert prog.buffer("total").shape == ()
    sch = pl.Schedule(prog)
    with pytest.raises(pl.ScheduleError, match="total"):
        sch.parallel(sch.get_loops(sch.get_block("y"))[0])
    a = rng.standard_normal(6)
    got = np.full(6, np.nan)
    pl.build(pl.auto_schedule(prog))(a, got)
    np.testing.assert_allclose(got, np.cumsum(a), rtol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 8, 11])
def test_downward_and_stepped_loops(n, rng):
    prog = pl.script(backwards)
    assert "i_down" in prog.statements[0].iters
    a = rng.standard_normal(n)
    expected = np.full(n, np.nan)
    backwards(n, a, expected)
    got = np.full(n, np.nan)
    pl.build(prog)(a, got)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    again = np.full(n, np.nan)
    pl.build(pl.auto_schedule(prog))(a, again)
    np.testing.assert_allclose(again, expected, rtol=1e-12)


def test_powers_helpers_and_chained_assignment(rng):
    prog = pl.script(powers)
    a = rng.uniform(0.5, 2.0, 5)
    expected = np.full((5, 6), np.nan)
    powers(5, a, expected)
    got = np.full((5, 6), np.nan)
    pl.build(prog)(a, got)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_value_arguments_take_numbers_or_zero_dimensional_arrays(rng):
    mod = pl.build(pl.script(row_sums))
    a = rng.standard_normal((3, 4))
    for alpha in (0.5, np.float64(0.5), np.array(0.5)):
        np.testing.assert_allclose(mod(alpha, a), 0.5 * a.sum(axis=1), rtol=1e-12)


def test_size_argument_not_in_any_shape_is_passed_by_name(rng):
    def steps(t: int, n: int, A: pl.Buffer[("n",), F]):
        for s in range(t):
            for i in range(n):
                A[i] = A[i] * 0.5
    mod = pl.build(pl.script(steps))
    a = rng.standard_normal(4)
    got = a.copy()
    mod(got, t=3)
    np.testing.assert_allclose(got, a / 8, rtol=1e-12)


def test_scalar_takes_the_kernels_float_dtype():
    def f(n: int, A: pl.Buffer[("n",), "float32"], y: pl.Buffer[("n",), "float32"]):
        for i in range(n):
            t = 0
            t += A[i] * 2.0
            y[i] = t
    prog = pl.script(f)
    assert prog.buffer("t").dtype is DType.FLOAT32
    a = np.arange(3, dtype="float32") + 0.25
    np.testing.assert_allclose(pl.build(prog)(a), 2 * a)


MALICIOUS = {
    "annotation_call": 'def f(A: __import__("os").system("touch {path}")):\n    A[0] = 1.0\n',
    "alloc_call": ('def f(A: pl.Buffer[(4,), "float64"]):\n'
                   '    T = pl.alloc(__import__("os").system("touch {path}"), "float64")\n'
                   '    A[0] = 1.0\n'),
    "lambda": 'def f(A: (lambda: __import__("os").system("touch {path}"))()):\n    A[0] = 1.0\n',
    "dunder": 'def f(A: pl.__builtins__):\n    A[0] = 1.0\n',
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_annotations_are_never_evaluated_as_code(case, tmp_path):
    target = tmp_path / "pwned"
    with pytest.raises(pl.ParseError, match="cannot evaluate"):
        pl.script(MALICIOUS[case].format(path=target))
    assert not target.exists()


ERRORS = {
    "assign_argument": ("def f(alpha: float, A: pl.Buffer[(3,), 'float64']):\n"
                        "    alpha = 2.0\n    A[0] = alpha\n", "'alpha' is an argument"),
    "buffer_as_scalar": ("def f(A: pl.Buffer[(3,), 'float64']):\n    A = 1.0\n",
                         "'A' is a buffer, size or loop variable"),
    "helper_arity": ("def f(A: pl.Buffer[(3,), 'float64']):\n    A[0] = square(A[1], 2)\n",
                     "takes 1 positional arguments"),
    "bad_annotation": ("def f(A: 'float64'):\n    A[0] = 1.0\n", "annotate 'A' as"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors_name_the_construct(case):
    text, message = ERRORS[case]
    with pytest.raises(pl.ParseError, match=message):
        pl.script(text)


def recursive(x):
    return recursive(x)


def test_recursive_helper_is_refused():
    with pytest.raises(pl.ParseError, match="more than 16 deep"):
        pl.script("def f(A: pl.Buffer[(3,), 'float64']):\n    A[0] = recursive(A[1])\n")


def test_alloc_without_dtype_keeps_the_kernels_precision():
    def f(n: int, A: pl.Buffer[("n",), "float64"]):
        T = pl.alloc((n,))
        for i in range(n):
            T[i] = A[i] * 3.0
        for i in range(n):
            A[i] = T[i]
    assert pl.script(f).buffer("T").dtype is DType.FLOAT64
    with pytest.raises(pl.ParseError, match=r'pl.alloc\(\(n,\), "float64"\)'):
        pl.script("def g(A: pl.Buffer[('n',), 'float64']):\n    T = pl.alloc()\n    A[0] = 1.0\n")
