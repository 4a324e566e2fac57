# SPDX-License-Identifier: Apache-2.0
"""Substitution rules in make_kernel's instructions (Loo.py's ``f(x, y) := a[x] * y``)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def test_rules_are_expanded_where_called_and_may_call_each_other(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", """
        f(x, y) := a[x] * y
        g(x) := f(x, 2) + f(x + 1, 3)
        out[i] = g(i) + f(i, i)
    """)
    assert "f(x, y) := a[x] * y" in str(knl)
    assert [str(d) for d in knl.program.buffer("a").shape] == ["n + 1"]
    n = 11
    a = rng.standard_normal(n + 1).astype("float32")
    out = np.full(n, np.nan, "float32")
    pl.build(knl)(a, out)
    ref = 2 * a[:n] + 3 * a[1:] + a[:n] * np.arange(n)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_a_rule_is_typed_by_its_arguments(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", ["sq(x) := x * x", "out[i] = sq(a[i]) + sq(i)"],
                         args=[pl.ArrayArg("a", "float64"), ...])
    assert knl.program.buffer("out").dtype is pl.DType.FLOAT64
    a = rng.standard_normal(6)
    out = np.full(6, np.nan)
    pl.build(knl)(a, out)
    np.testing.assert_allclose(out, a * a + np.arange(6) ** 2)


@pytest.mark.parametrize("text, message, pointer", [
    ("f(x) := a[x]\nout[i] = f(i, 1)", "rule 'f' takes 1 argument", "out[i] = f(i, 1)"),
    ("f(x) := f(x)\nout[i] = f(i)", "a rule cannot call itself", "f(x) := f(x)"),
    ("f(x) := x[1]\nout[i] = f(i)", "'x' is an argument of the rule, not an array",
     "f(x) := x[1]"),
    ("sum(x) := x\nout[i] = 1", "'sum' is a function of the kernel language", "sum(x) := x"),
    ("exp(x) := x\nout[i] = exp(i)", "'exp' is a function of the kernel language",
     "exp(x) := x"),
    ("f(x) := q * x\nout[i] = f(i)", "unknown name 'q'.*in substitution rule 'f'",
     "f(x) := q * x"),
    ("f(x, x) := x\nout[i] = f(i, i)", "names parameter 'x' twice", "f(x, x) := x"),
    ("f(x) := x\nf(y) := y\nout[i] = f(i)", "defined twice", "f(y) := y"),
    ("f(x) := a[x] +\nout[i] = f(i)", "expected an expression", "f(x) := a[x] +"),
    ("f(x) := x\nf[i] = 1", "'f' is a substitution rule; it cannot be assigned", "f[i] = 1"),
    ("if i > 0\n f(x) := x\nend\nout[i] = 1", "inside an 'if' block", "f(x) := x"),
])
def test_rule_errors_quote_the_line_and_name_the_rule(text, message, pointer):
    with pytest.raises(pl.ParseError, match=message) as err:
        pl.make_kernel("{ [i] : 0 <= i < n }", text)
    assert pointer in str(err.value) and "^" in str(err.value)


def test_an_unknown_function_lists_the_rules():
    with pytest.raises(pl.ParseError, match="substitution rules: f"):
        pl.make_kernel("{ [i] : 0 <= i < n }", ["f(x) := 2 * x", "out[i] = g(i)"])


def test_extract_subst_names_a_repeated_subexpression_that_precompute_then_stores(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }",
                         "out[i] = a[i] * 2 + a[i + 1] * 2 + a[i + 2] * 2")
    knl = pl.extract_subst(knl, "twice", "a[x] * 2", parameters="x")
    assert [str(u.args[0]) for u in knl.rules[0].uses] == ["i", "i + 1", "i + 2"]
    knl = pl.split_iname(knl, "i", 4)
    knl = pl.precompute(knl, "twice", ["i_inner"])
    assert "twice_0[" in knl.loops()
    a = rng.standard_normal(13).astype("float32")
    out = np.full(11, np.nan, "float32")
    pl.build(knl)(a, out)
    np.testing.assert_allclose(out, 2 * (a[:-2] + a[1:-1] + a[2:]), rtol=1e-5)


def test_extract_subst_errors():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[i] + 1")
    with pytest.raises(pl.ParseError, match="no instruction .* has a subexpression"):
        pl.extract_subst(knl, "f", "a[x] * 3", parameters="x")
    with pytest.raises(pl.ParseError, match="extract_subst: expected an expression"):
        pl.extract_subst(knl, "f", "a[x] *", parameters="x")
    with pytest.raises(pl.ParseError, match="not a new identifier"):
        pl.extract_subst(knl, "1f", "a[x]", parameters="x")
