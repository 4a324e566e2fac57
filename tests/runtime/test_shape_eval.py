# SPDX-License-Identifier: Apache-2.0
"""Shape expressions: evaluation, reading as affine forms, solving for one parameter."""
import pytest

from polyloop.errors import PolyloopError
from polyloop.ir.expr import BinOpKind, Var, binop, const
from polyloop.ir.program import param
from polyloop.runtime.shapes import Affine, evaluate, solve, to_affine

n, m = param("n"), param("m")


@pytest.mark.parametrize("expr, env, value", [
    (const(7), {}, 7),
    (n, {"n": 5}, 5),
    (n + 2, {"n": 5}, 7),
    (2 * n - 1, {"n": 5}, 9),
    (n * m, {"n": 3, "m": 4}, 12),
    (n // 2, {"n": 7}, 3),
    (n % 3, {"n": 7}, 1),
    ((n - 10) // 4, {"n": 7}, -1),        # floor division, as in Python
    (binop(BinOpKind.MIN, n, 8), {"n": 20}, 8),
    (binop(BinOpKind.MAX, n, m), {"n": 2, "m": 9}, 9),
    (-n + 10, {"n": 3}, 7),
])
def test_evaluate(expr, env, value):
    assert evaluate(expr, env) == value


def test_evaluate_rejects_unbound_iterators_and_floats():
    with pytest.raises(PolyloopError, match="'n' is not bound"):
        evaluate(n + 1, {})
    with pytest.raises(PolyloopError, match="loop iterator 'i'"):
        evaluate(Var("i"), {})
    with pytest.raises(PolyloopError, match="not an integer"):
        evaluate(const(2.5), {})


@pytest.mark.parametrize("expr, form", [
    (n, Affine((("n", 1),), 0)),
    (n + 2, Affine((("n", 1),), 2)),
    (2 * n - 1, Affine((("n", 2),), -1)),
    ((n + 1) * 3, Affine((("n", 3),), 3)),
    (n - n + 4, Affine((), 4)),
    (n + 2 * m, Affine((("m", 2), ("n", 1)), 0)),
    (n * m, None),
    (n // 2, None),
    (binop(BinOpKind.MIN, n, 8), None),
])
def test_to_affine(expr, form):
    assert to_affine(expr) == form


def test_solve_for_the_one_unbound_parameter():
    assert solve(to_affine(2 * n + 2), 10, {}) == ("n", 4)
    assert solve(to_affine(2 * n + 2), 9, {}) is None          # no integer solution
    assert solve(to_affine(n + 2 * m), 11, {"n": 3}) == ("m", 4)
    assert solve(to_affine(n - 1), 0, {}) == ("n", 1)
