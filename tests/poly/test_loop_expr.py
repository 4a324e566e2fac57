# SPDX-License-Identifier: Apache-2.0
"""Loop expressions are typed values (``poly.loop_expr.LoopExpr``): compared and hashed by
their text, pickled without their isl objects, and read on the build path without parsing the
text the primitives printed."""
from __future__ import annotations

import pickle

import islpy as isl
import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.printer import loops_to_str
from polyloop.lower import lower
from polyloop.poly import isl_util
from polyloop.poly.loop_expr import LoopExpr
from polyloop.poly.tree import loops


def _split_schedule():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.compute((n, n), lambda i, j: A[i, j] * 2.0 + A[j, i], name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(j0, i, j1)
    return sch


def test_equal_texts_are_equal_values_with_one_hash():
    a, b = LoopExpr("{ S[i, j] -> [(j)] }"), LoopExpr("{ S[i, j] -> [(j)] }")
    a.map(("n",))                       # a remembered map does not take part
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != LoopExpr("{ S[i, j] -> [(i)] }")
    assert str(a) == a.text == "{ S[i, j] -> [(j)] }"


def test_a_map_is_read_once_per_parameters():
    e = LoopExpr("{ S[i] -> [(i)] }")
    assert e.map(("n",)) is e.map(("n",))
    assert e.map(("n",)).dim(isl.dim_type.param) == 1
    assert e.map(()).dim(isl.dim_type.param) == 0


def test_a_tree_pickles_and_builds_the_same_code():
    sch = _split_schedule()
    root = sch.state.root
    again = pickle.loads(pickle.dumps(root))
    assert again == root and hash(again) == hash(root)
    exprs = [e for n in loops(again) for _, e in n.exprs]
    assert exprs and all(isinstance(e, LoopExpr) and not e._maps for e in exprs)
    mine = loops_to_str(lower(sch.program, root).body)
    assert loops_to_str(lower(sch.program, again).body) == mine


@pytest.mark.parametrize("n", [1, 13, 30])
def test_the_split_schedule_computes_what_numpy_does(n):
    mod = pl.build(_split_schedule())
    a = np.random.default_rng(n).standard_normal((n, n)).astype("float32")
    out = np.full((n, n), np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + a.T, rtol=1e-6)


def test_the_build_parses_no_loop_expression_a_primitive_made(monkeypatch):
    sch = _split_schedule()
    made = {e.text for n in loops(sch.state.root) for _, e in n.exprs
            if "floor" in e.text or "mod" in e.text}
    assert made, "the split should have made quasi-affine loop expressions"
    parsed: list[str] = []
    real = isl_util._parse

    def record(kind, text):
        parsed.append(text)
        return real(kind, text)
    monkeypatch.setattr(isl_util, "_parse", record)
    lower(sch.program, sch.state.root)
    assert not made & set(parsed)
