# SPDX-License-Identifier: Apache-2.0
"""The fast legality verdicts (time deltas over schedule prefixes, cached per state shape) agree
with the direct isl formulation on legal and illegal loop orders, and cached verdicts never
hide a refusal."""
from __future__ import annotations

import itertools

import pytest

import polyloop as pl
from polyloop.poly.legality import carried_at
from polyloop.poly.tree import loop_position, loops, statements_under
from polyloop.schedule import loops as loops_mod
from polyloop.schedule import state as st
from polyloop.schedule import verdicts as vd
from polyloop.schedule import verdict_cache
from polyloop.schedule.kernel import schedule_of

KERNELS = {
    # distance (1, -1): carried by i, and i and j cannot be interchanged
    "recurrence": ("{ [i, j] : 1 <= i < n and 0 <= j < m - 1 }",
                   "a[i, j] = a[i - 1, j + 1] + b[i, j]"),
    # a flow between two statements in one loop, and a reduction
    "two statements": ("{ [i, k] : 0 <= i < n and 0 <= k < n }",
                       "t[i] = 2*a[i] {id=s1}\nout[i] = sum(k, t[i]*b[i, k]) {id=s2, dep=s1}"),
    "matmul": ("{ [i, j, k] : 0 <= i, j, k < n }", "c[i, j] = sum(k, a[i, k]*b[k, j])"),
}


def _reference(state: st.State) -> tuple[bool, dict[int, bool]]:
    """(order broken?, carried per loop id) straight from isl, without deltas or caches."""
    fs = state.schedule_map()
    broken = any(not d.relation.intersect(fs[d.source].lex_ge_map(fs[d.sink])).is_empty()
                 for d in state.deps if not d.reduction)
    carried = {}
    for n in loops(state.root):
        stmts = set(statements_under(n))
        pos = loop_position(state.root, n.id)
        carried[n.id] = any(not carried_at(fs, d, pos).is_empty() for d in state.deps
                            if d.source in stmts and d.sink in stmts)
    return broken, carried


def _states(name: str, kernels=KERNELS):
    """The kernel's initial state, split, and every order of each perfect nest (legal or not)."""
    domain, insns = kernels[name]
    base = pl.Schedule(pl.make_kernel(domain, insns).program).state
    first = next(loops(base.root))
    split, _ = loops_mod.split(base, first, [None, 4], ["o", "i4"])
    for state in (base, split):
        yield state
        for top in state.root.children:
            chain = [top]
            while len(chain[-1].children) == 1 and hasattr(chain[-1].children[0], "children"):
                chain.append(chain[-1].children[0])
            for perm in itertools.permutations(chain):
                if list(perm) != chain:
                    yield loops_mod.reorder(state, [state.loop(n.id) for n in perm])


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_verdicts_match_isl(name):
    seen_broken = seen_legal = 0
    for state in _states(name):
        broken, carried = _reference(state)
        assert (vd.check_order(state) is not None) == broken
        for n in loops(state.root):
            assert (vd.check_parallel(state, n) is not None) == carried[n.id], n.name
        seen_broken += broken
        seen_legal += not broken
    assert seen_legal and (seen_broken or name != "recurrence")


def test_cached_verdicts_still_refuse():
    knl = pl.make_kernel(*KERNELS["matmul"])
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    # the same loop is checked again in a derived state: the cached verdict refuses as well
    for _ in range(2):
        with pytest.raises(pl.ScheduleError, match="cannot bind loop 'k'.*reduction"):
            pl.tag_inames(knl, {"k": "l.1"})
    knl = pl.split_iname(knl, "k", 8)
    with pytest.raises(pl.ScheduleError, match="k_inner"):
        pl.tag_inames(knl, {"k_inner": "l.1"})
    sch = schedule_of(pl.tag_inames(knl, {"k_outer": "for"}))
    assert vd.check_order(sch.state) is None


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_split_inherits_exact_verdicts(name):
    """A split takes over the verdicts of the state it splits (strip-mining keeps the order):
    broken orders stay refused and each parallel loop keeps what it carries, as isl says."""
    from polyloop.ir.loops import LoopKind
    checked = 0
    for state in _states(name):
        # make every loop parallel, one state per loop, and know its verdicts first
        for n in list(loops(state.root)):
            par = loops_mod.set_kind(state, n, LoopKind.PARALLEL)
            vd.check_order(par)
            vd.check_parallel(par, par.loop(n.id))
            for target in loops(par.root):
                if target.id == n.id:
                    continue
                for factors in ([None, 3], [2, None, 2] if name == "matmul" else [None, 5]):
                    try:
                        new, _ = loops_mod.split(par, target, factors, None)
                    except pl.ScheduleError:
                        continue     # a None factor needs a constant extent
                    broken, carried = _reference(new)
                    assert (vd.check_order(new) is not None) == broken
                    assert (vd.check_parallel(new, new.loop(n.id)) is not None) == carried[n.id]
                    checked += 1
    assert checked


# distribute ---------------------------------------------------------------------------------

DISTRIBUTE = dict(KERNELS, **{
    # s2 writes b[i] that s1 reads at i + 1: distributing s1 before s2 reverses the flow
    "backward flow": ("{ [i] : 1 <= i < n }", "a[i] = b[i - 1] {id=s1}\nb[i] = 2*c[i] {id=s2}"),
    "forward flow": ("{ [i] : 1 <= i < n }", "b[i] = 2*c[i] {id=s2}\na[i] = b[i - 1] {id=s1}"),
})


@pytest.mark.parametrize("name", sorted(DISTRIBUTE))
def test_distribute_inherits_exact_verdicts(name):
    """Distribution passes the verdicts it can prove from the schedule items on
    (``state.transfer_verdict``): the order and every loop's carried verdict of the result
    agree with isl, with verdicts of the old state known (all of them) or not."""
    from polyloop.ir.loops import LoopKind
    from polyloop.schedule import fusion
    checked = passed = 0
    for state in _states(name, DISTRIBUTE):
        for n in list(loops(state.root)):
            par = loops_mod.set_kind(state, n, LoopKind.PARALLEL)
            vd.check_order(par)
            for m in loops(par.root):
                vd.check_parallel(par, m)
            for target in loops(par.root):
                for at in range(1, len(target.children)):
                    before = len(par.memo.verdicts)
                    new, _, _ = fusion.distribute(par, target, at, None)
                    passed += len(new.memo.verdicts) > before
                    broken, carried = _reference(new)
                    assert (vd.check_order(new) is not None) == broken
                    for m in loops(new.root):
                        assert (vd.check_parallel(new, m) is not None) == carried[m.id], m.name
                    checked += 1
    if name in ("two statements", "backward flow", "forward flow"):
        assert checked and passed


def test_distribute_refusal_unchanged():
    """A distribution that reverses a flow is refused with the dependence and an instance."""
    knl = pl.make_kernel(*DISTRIBUTE["backward flow"])
    sch = pl.Schedule(knl.program)
    with pytest.raises(pl.ScheduleError, match=r"distribute\(i, at=1\) would break the RAW dependence "
                       r"s2 -> s1 on buffer b.*s1\(i=\d+\) reads b\[\d+\] written by s2"):
        sch.distribute(sch.get_loops("s1")[0], at=1)
    knl = pl.make_kernel(*DISTRIBUTE["forward flow"])
    sch = pl.Schedule(knl.program)
    sch.distribute(sch.get_loops("s1")[0], at=1)
    assert len(sch.state.root.children) == 2


@pytest.mark.parametrize("fetch", [("a",), ("a", "b")])
def test_prefetch_kernel_verdicts_match_isl(fetch):
    """add_prefetch distributes, reorders and inserts the copy, passing verdicts on at each
    step: the tagged result's order and every loop's carried verdict agree with isl."""
    knl = pl.make_kernel(*KERNELS["matmul"])
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "k", 16)
    sweeps = {"a": ["i_inner", "k_inner"], "b": ["k_inner", "j_inner"]}
    for name in fetch:
        knl = pl.add_prefetch(knl, name, sweeps[name])
    state = schedule_of(knl).state
    broken, carried = _reference(state)
    assert not broken and vd.check_order(state) is None
    for n in loops(state.root):
        assert (vd.check_parallel(state, n) is not None) == carried[n.id], n.name
    assert carried[next(n.id for n in loops(state.root) if n.name == "k_outer")]


@pytest.mark.parametrize("sweep", [["i_inner", "k_inner"], ["k_inner"]])
def test_prefetch_records_the_copy_verdict_isl_would_give(monkeypatch, sweep):
    """add_prefetch records the verdict of the copy -> consumer dependence instead of
    computing it (same outer loop values, copy first in the sequence): the recorded verdict is
    the one the time deltas give."""
    from polyloop.schedule import prefetch as prefetch_mod
    seen = []
    plain = vd.record_first_in_sequence

    def record(state, k):
        got = plain(state, k)
        seen.append((state, k, got))
        return got
    monkeypatch.setattr(prefetch_mod, "record_first_in_sequence", record)
    knl = pl.make_kernel(*KERNELS["matmul"])
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "k", 16)
    pl.add_prefetch(knl, "a", sweep)
    assert [got for _, _, got in seen] == [True]
    state, k, _ = seen[0]
    items = dict(st.shape(state.program, state.root))
    d = state.deps[k]
    key = verdict_cache._dep_key(k, items[d.source], items[d.sink])
    recorded = state.memo.verdicts.pop(key)
    assert vd.verdict(state, k, d, items[d.source], items[d.sink]) == recorded
