# SPDX-License-Identifier: Apache-2.0
"""The one sum reader (ir.linear) as its two readers use it: simplify's affine forms with
opaque atoms and strength's canonical divisions, plus the reader's own edge cases."""
from __future__ import annotations

import pytest

from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var, VarKind, cast
from polyloop.ir.linear import SumRules, add_constant, add_term, read_sum
from polyloop.ir.shapes import evaluate
from polyloop.ir.simplify import affine_form, linear_coefficient, simplify
from polyloop.lower.strength import canonical_divisions

i, j, n = Var("i"), Var("j"), Var("n", VarKind.PARAM)
# size parameters, so that ir.shapes.evaluate gives the value of a sum over them
pi, pj = Var("i", VarKind.PARAM), Var("j", VarKind.PARAM)

COUNT = SumRules(atom=lambda e: {e.name: 1} if isinstance(e, Var) else None,
                 scale=lambda t, k: {v: c * k for v, c in t.items()},
                 plus=lambda a, b: {v: a.get(v, 0) + b.get(v, 0) for v in {**a, **b}},
                 factor=lambda e: getattr(e, "value", None))


@pytest.mark.parametrize("expr, expected", [
    (3 * (i - j) + j, {"i": 3, "j": -2}),
    (-(i * 4), {"i": -4}),
    (i * 2 * 5, {"i": 10}),
    (i - i, {"i": 0}),
])
def test_read_sum_reads_negations_sums_and_constant_products(expr, expected):
    assert read_sum(expr, COUNT) == expected


def test_read_sum_refuses_what_its_atoms_refuse_and_non_integers():
    assert read_sum(i * j, COUNT) is None                # no side is a constant
    assert read_sum(i // 2 + j, COUNT) is None           # the atom reader refuses i // 2
    assert read_sum(cast(DType.FLOAT32, i) + 1.0, COUNT) is None


def test_whole_reads_a_node_before_the_walk_looks_inside():
    rules = SumRules(atom=COUNT.atom, scale=COUNT.scale, plus=COUNT.plus, factor=COUNT.factor,
                     whole=lambda e: {"whole": 1} if e is i else None)
    assert read_sum(2 * i + j, rules) == {"whole": 2, "j": 1}


def test_writer_puts_signs_in_operators_and_the_constant_last():
    assert str(add_constant(add_term(add_term(None, -1, i), 2, j), 0)) == "-i + 2 * j"
    assert str(add_constant(add_term(None, -3, n), -4)) == "-(3 * n) - 4"
    assert str(add_constant(None, 7)) == "7"


def test_simplify_and_affine_form_read_through_the_shared_walker():
    assert str(simplify(n - 1 + 1)) == "n"
    # equal floor divisions are one opaque atom (compared by their text); constants fold
    assert str(simplify(2 * (i // 4) - (i // 4) + 3 - 3)) == "i // 4"
    assert str(simplify(2 * (i // 4) - (i // 8) + 3 - 3)) == "2 * (i // 4) - i // 8"
    assert affine_form(4 * i + 3 - i) == ({"i": 3}, 3)
    assert affine_form(i // 4 + 1) is None
    assert linear_coefficient(2 * i + n, "i") == 2
    assert linear_coefficient((1 + 1) * i, "i") == 2   # a side that is a constant sum


def test_strength_reads_divisions_through_the_shared_walker():
    yx0, yx1 = Var("yx0"), Var("yx1")
    assert str(canonical_divisions(yx0 - (12 * yx0 - yx1 + 27) // 28)) == \
        str(canonical_divisions((16 * yx0 + yx1) // 28))
    assert str(canonical_divisions((i * 16 + 600) % 28)) == "(16 * i + 12) % 28"
    # a quotient subtracted becomes one added: -(b // c) = (c - 1 - b) // c, then the numerator
    # is made non-negative: (3 - i) // 4 = -i + (3 * i + 3) // 4
    assert str(canonical_divisions(-(i // 4) + 2 * (i // 4))) == \
        "-i + 2 * (i // 4) + (3 * i + 3) // 4"
    assert str(canonical_divisions(-(i % 4))) == "(3 * i + 3) % 4 - 3"


@pytest.mark.parametrize("expr", [-(pi // 4) + 2 * (pi // 4), -(pi % 4), 3 * (pi // 7) - pj // 5,
                                  pi - (12 * pi - pj + 27) // 28, 2 * (pi - pj) - (pj % 3)])
def test_rewritten_sums_keep_their_value(expr):

    for a in range(-9, 10):
        for b in range(-4, 5):
            env = {"i": a, "j": b}
            assert evaluate(canonical_divisions(expr), env) == evaluate(expr, env)
            assert evaluate(simplify(expr), env) == evaluate(expr, env)
