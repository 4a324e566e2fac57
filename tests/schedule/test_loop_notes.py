# SPDX-License-Identifier: Apache-2.0
"""Prefetch hints travel from the schedule to lowering as typed values, never as parsed text."""
from __future__ import annotations

import numpy as np

import polyloop as pl
from polyloop.ir.loop_notes import AlongLoop, PrefetchHint
from polyloop.poly.tree import loops


def _scaled():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    j0, _ = sch.split(j, factors=[None, 16])
    return sch, i, j0


def test_a_hint_is_a_typed_value_on_its_loop():
    sch, i, j0 = _scaled()
    sch.prefetch("B", "A", j0, distance=2, along=i, locality=1)
    (hint,) = [v for n in loops(sch.state.root) for k, v in n.annotations if k == "prefetch"]
    assert isinstance(hint, PrefetchHint)
    assert (hint.buffer, hint.block, hint.distance, hint.write, hint.locality) == \
        ("A", "B", 2, False, 1)
    assert isinstance(hint.along, AlongLoop) and hint.along.name == "i"
    assert "prefetch=A for B, 2 iterations ahead along loop i (#" in sch.show()


def test_annotation_text_that_looks_like_a_hint_is_only_a_comment():
    sch, _, j0 = _scaled()
    sch.annotate(j0, "prefetch", "A for B, 1 iteration ahead, read, locality 3")
    mod = pl.build(sch)
    assert "__builtin_prefetch" not in mod.source
    assert "prefetch: A for B, 1 iteration ahead, read, locality 3" in mod.source
    a = np.random.rand(19, 19).astype("float32")
    out = np.full((19, 19), np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2)
