# SPDX-License-Identifier: Apache-2.0
"""Annotation keys that a later layer acts on are NoteKey members from the schedule on; a key
only shown stays the user's text; traces keep the text the user typed."""
from __future__ import annotations

import numpy as np

import polyloop as pl
from polyloop.ir.loop_notes import NoteKey
from polyloop.poly.tree import loops


def _schedule():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    sch = pl.Schedule(B)
    (i,) = sch.get_loops("B")
    return B, sch, i


def _keys(sch):
    return [k for n in loops(sch.state.root) for k, _ in n.annotations]


def test_a_key_a_target_acts_on_becomes_typed_and_a_note_stays_text():
    _, sch, i = _schedule()
    sch.annotate(i, "nontemporal", "B")
    sch.annotate(i, "why", "a note")
    typed, note = _keys(sch)
    assert typed is NoteKey.NONTEMPORAL
    assert type(note) is str and note == "why"
    assert NoteKey.of("isolate") is NoteKey.ISOLATE and NoteKey.of("why") == "why"


def test_the_trace_keeps_the_typed_text_and_replays_to_the_same_tree():
    B, sch, i = _schedule()
    sch.annotate(i, "nontemporal", "B")
    text = str(sch.trace)
    assert "sch.annotate(l0, 'nontemporal', 'B')" in text.splitlines()
    assert "NoteKey" not in text
    again = pl.Schedule.from_trace(pl.Schedule(B).program, sch.trace)
    assert _keys(again) == [NoteKey.NONTEMPORAL]
    assert again.show() == sch.show()


def test_a_note_reaches_the_generated_code_as_a_comment(rng):
    _, sch, i = _schedule()
    sch.annotate(i, "why", "shown only")
    mod = pl.build(sch)
    assert "why: shown only" in mod.source
    a = rng.standard_normal(37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_a_prefetch_hint_is_keyed_by_a_member():
    _, sch, i = _schedule()
    i0, _ = sch.split(i, factors=[None, 16])
    sch.prefetch("B", "A", i0)
    (key,) = _keys(sch)
    assert key is NoteKey.PREFETCH
    assert "prefetch=A for B" in sch.show()



def test_a_loop_covering_its_whole_grid_is_keyed_by_a_member():
    from polyloop.ir.loops import For, iter_nodes
    from polyloop.lower.launches import lower_device
    _, sch, i = _schedule()
    i0, i1 = sch.split(i, factors=[None, 32])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    device = lower_device(sch.program, sch.state.root)
    keys = [k for launch in device.launches for n in iter_nodes(launch.kernel.body)
            if isinstance(n, For) for k, v in n.annotations if v == "exact"]
    assert keys and all(k is NoteKey.GRID for k in keys)
