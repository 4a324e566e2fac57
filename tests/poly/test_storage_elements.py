# SPDX-License-Identifier: Apache-2.0
"""``storage._elements_stay`` (asked once in the key space) answers as the pairwise test it
replaced (every write/read pair of instances on one element in one key iteration), on the
temporaries of kernels where it holds and where it does not."""
from __future__ import annotations

import polyloop as pl
from polyloop.poly import storage
from polyloop.poly.access import accesses
from polyloop.poly.affine import prefix_map

def _pairwise(program, buffer, keys) -> bool:
    acc = [a for a in accesses(program) if a.buffer == buffer]
    al = storage._align
    for w in acc:
        for r in acc:
            if not w.is_write or r.is_write:
                continue
            pairs = w.relation.apply_range(al(r.relation, w.relation).reverse())
            kw, kr = keys[w.statement], keys[r.statement]
            same = al(kw, kr).apply_range(al(kr, kw).reverse())
            if not al(pairs, same).is_subset(al(same, pairs)):
                return False
    return True


def _kernels():
    mm = pl.make_kernel("{ [i, j, k] : 0 <= i, j, k < n }", "c[i, j] = sum(k, a[i, k]*b[k, j])")
    mm = pl.split_iname(mm, "i", 16, outer_tag="g.1", inner_tag="l.1")
    mm = pl.split_iname(mm, "j", 16, outer_tag="g.0", inner_tag="l.0")
    mm = pl.split_iname(mm, "k", 16)
    yield mm
    yield pl.add_prefetch(pl.add_prefetch(mm, "a", ["i_inner", "k_inner"]), "b",
                          ["k_inner", "j_inner"])
    # a private scalar that carries a value from one iteration to the next
    yield pl.make_kernel("{ [i] : 0 <= i < n }", "<> s = 2*a[i] {id=s1}\n"
                         "out[i] = s + 1 {id=s2, dep=s1}")
    yield pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < i }",
                         "<> t = a[i, j] {id=s1}\nout[i, j] = t*t {id=s2, dep=s1}")


def test_key_space_test_matches_pairwise(monkeypatch):
    seen = []
    plain = storage._elements_stay

    def record(program, buffer, keys):
        got = plain(program, buffer, keys)
        assert got == _pairwise(program, buffer, keys), buffer
        seen.append(got)
        return got
    monkeypatch.setattr(storage, "_elements_stay", record)
    for knl in _kernels():
        _lower(knl)
    # and with keys that separate iterations the values cross (loop i of a recurrence)
    p = pl.make_kernel("{ [i] : 1 <= i < n }", "b[i] = b[i - 1] + a[i]").program
    key = prefix_map(p, "insn", ["{ insn[i] -> [(i)] }"])
    assert not plain(p, "b", {"insn": key}) and not _pairwise(p, "b", {"insn": key})
    # a row sum's accumulator, one element per row: its values stay in their row (compaction
    # no longer asks here, its footprint being injective)
    from polyloop.poly.order import original_tree
    p = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < m }", "y[i] = sum(k, a[i, k])").program
    row = next(n for n in original_tree(p)[0].children if n.name == "i")
    keys = {s: prefix_map(p, s, [e]) for s, e in row.exprs}
    acc = next(b.name for b in p.buffers if b.name.startswith("acc"))
    assert plain(p, acc, keys) and _pairwise(p, acc, keys)
    assert False in seen


def _lower(knl):
    from polyloop.codegen.opencl import generate_opencl
    from polyloop.lower.launches import lower_device
    from polyloop.schedule.kernel import schedule_of
    sch = schedule_of(knl)
    return generate_opencl(lower_device(sch.program, sch.state.root))


def test_compact_scalar_and_box_offsets(monkeypatch):
    """A scalar temporary compacts to a scalar (no dimension, no offsets); a private array
    indexed by its loops compacts to one element (index 0: no corner to subtract)."""
    from polyloop.frontend import kernel_builder as kernel_mod
    from polyloop.poly.order import original_tree
    insns = "<> s = 2*a[i] {id=s1}\nout[i] = s + 1 {id=s2, dep=s1}"
    wide = pl.make_kernel("{ [i] : 0 <= i < n }", insns).program
    got = storage.compact(wide, original_tree(wide)[0], "s")
    assert got.shape == (1,) and got.offsets == {"s1": (), "s2": ()}
    monkeypatch.setattr(kernel_mod, "privatized", lambda p, accumulators=None: p)
    scalar = pl.make_kernel("{ [i] : 0 <= i < n }", insns).program
    got = storage.compact(scalar, original_tree(scalar)[0], "s")
    assert got.shape == () and got.offsets == {"s1": (), "s2": ()} and got.home == "i"



def test_offsets_only_for_dimensions_of_several_elements():
    """A prefetch buffer (declared over every loop) keeps the two dimensions of its tile, each
    with a corner per statement; an accumulator keeps none (one element per work-item)."""
    from polyloop.schedule.kernel import schedule_of
    mm, pf = list(_kernels())[:2]
    sch = schedule_of(pf)
    got = storage.compact(sch.program, sch.state.root, "a_fetch")
    assert got.shape == (1, 1, 1, 16, 16) and got.home == "k_outer"
    assert {len(c) for c in got.offsets.values()} == {2}
    sch = schedule_of(mm)
    got = storage.compact(sch.program, sch.state.root, "acc_k")
    assert set(got.shape) == {1} and set(got.offsets.values()) == {()}


def test_a_value_read_one_iteration_later_keeps_the_temporary_whole():
    """``t[i]`` written in iteration i and read in iteration i + 1 of its home loop: the
    footprints of two iterations overlap (not injective), the dataflow check runs and finds
    the value crossing, so there is no compaction."""
    from polyloop.poly.order import original_tree
    knl = pl.make_kernel("{ [i] : 1 <= i < n }",
                         "<> t[i] = 2*a[i] {id=w}\nout[i] = t[i] + t[i - 1] {dep=w}")
    p = knl.program
    got = storage.compact(p, original_tree(p)[0], "t")
    assert got == "a value written in one iteration of its home loop is read in another"
