# SPDX-License-Identifier: Apache-2.0
"""The verdict cache behind the legality checks (``verdicts``): each dependence's verdict is
computed once from one delta set and inherited by the states that tree edits derive (splits,
permutations, sequence edits), so re-checking after a primitive is mostly dictionary look-ups."""
from __future__ import annotations

from collections.abc import Sequence

from ..poly import deps as deps_mod
from ..poly import legality
from ..poly.loop_expr import LoopExpr
from ..poly.tree import LoopNode, loop_position, statements_under
from .state import State, Verdict, shape


def _dep_key(k: int, a: tuple, b: tuple) -> tuple:
    """What the verdict of ``deps[k]`` depends on: the two ends' schedule items, cut after the
    first sequence position where they differ (the order is decided there; no loop below it
    can carry the dependence) and with trailing zeros dropped (padding changes nothing)."""
    for p, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            return (k, a[:p + 1], b[:p + 1])
    n = max(len(a), len(b))
    while n and a[n - 1:n] in ((0,), ()) and b[n - 1:n] in ((0,), ()):
        n -= 1
    return (k, a[:n] + (0,) * (n - len(a[:n])), b[:n] + (0,) * (n - len(b[:n])))


def verdict(state: State, k: int, d: deps_mod.Dependence, a: tuple, b: tuple,
            pos: int | None = None) -> Verdict:
    """The verdict of ``d = deps[k]`` for source items ``a`` and sink items ``b``: one delta
    set over the whole schedule vector gives the order and every loop's answer at once
    (remembered per dependence and items, shared by every state and tag asking)."""
    memo = state.memo
    assert memo is not None
    key = _dep_key(k, a, b)
    v = memo.verdicts.get(key)
    if v is None or (pos is not None and v.carries(pos) is None):
        _, ka, kb = key
        if ka and isinstance(ka[0], int) and isinstance(kb[0], int) and ka[0] != kb[0]:
            v = Verdict(kb[0] < ka[0], (True,))   # different top-level nests
        else:
            deltas = legality.time_deltas(_time_map(state, d.source, ka),
                                          _time_map(state, d.sink, kb), d)
            zero = [isinstance(x, int) and x == y for x, y in zip(ka, kb)]
            v = Verdict(*legality.verdicts(deltas, zero))
        memo.verdicts[key] = v
    return v


def _time_map(state: State, stmt: str, items: tuple):
    memo = state.memo
    assert memo is not None
    got = memo.maps.get((stmt, items))
    if got is None:
        got = memo.maps[(stmt, items)] = legality.time_map(state.program, stmt, items)
    return got


def _inherit(old: State, new: State, position: int, under: set[str], width: int,
             keep_order: bool, perm: Sequence[int] | None = None) -> None:
    """Carry the per-dependence verdicts of ``old`` over to ``new``, which differs from it in
    the ``width`` flat dimensions from ``position`` (one loop there became ``width`` loops, or a
    perfect chain of ``width`` loops was permuted, new slot ``j`` holding old slot
    ``perm[j]``) for the statements ``under`` them, and is otherwise the same tree. A
    dependence with an end outside ``under`` is decided at a sequence position above
    ``position``: its verdict does not change. One inside is computed on ``old`` if need be
    (on the simpler schedule); if none of the old loops there carries it, the new ones carry
    nothing either and everything else about it stays (see the callers for why); otherwise
    the new loops' answers are left to be computed, except for a permutation that keeps the
    relative order of the chain's loops on which the dependence's pairs may differ (see
    ``_permuted``)."""
    memo = new.memo
    assert memo is not None and old.memo is memo, "verdicts hold for one program and its deps"
    old_items = dict(shape(old.program, old.root))
    new_items = dict(shape(new.program, new.root))
    old_width = width if keep_order else 1
    for k, d in enumerate(old.deps):
        if d.source not in under or d.sink not in under:
            continue
        v = verdict(old, k, d, old_items[d.source], old_items[d.sink])
        quiet = all(v.carries(p) is False for p in range(position, position + old_width))
        if keep_order and not quiet:
            got = _permuted(v, position, perm) if perm is not None else None
            if got is not None:
                memo.verdicts.setdefault(_dep_key(k, new_items[d.source], new_items[d.sink]),
                                         got)
            continue
        here = (False,) * width if quiet else (None,) * width
        carried = v.carried[:position] + here + v.carried[position + old_width:]
        memo.verdicts.setdefault(_dep_key(k, new_items[d.source], new_items[d.sink]),
                                 Verdict(v.broken, carried))


def _permuted(v: Verdict, position: int, perm: Sequence[int]) -> Verdict | None:
    """The verdict after permuting the chain of loops at flat dimensions ``position`` ..
    ``position + len(perm) - 1`` (new slot ``j`` holds old slot ``perm[j]``), or None.

    Proof. If no dimension before ``p`` carries the dependence (``carried`` False, known,
    for all of them), every pair agrees on all of them: a pair differing first at some
    dimension would be carried there. So the leading dimensions with carried False are 0 in
    every delta. Columns that are 0 in every delta change neither any delta's lexicographic
    sign nor which pairs agree before another column. If the chain's other columns keep their
    relative order, every delta keeps its sign (order verdict) and each of those columns
    carries what it carried, as do the columns below the chain; the zero ones carry nothing."""
    zero = 0
    while zero < position + len(perm) and v.carries(zero) is False:
        zero += 1
    moving = [p for p in perm if position + p >= zero]
    if moving != sorted(moving):
        return None
    chain = tuple(v.carries(position + p) if position + p >= zero else False for p in perm)
    n = max(len(v.carried), position + len(perm))
    rest = tuple(v.carries(p) for p in range(position + len(perm), n))
    return Verdict(v.broken, tuple(v.carries(p) for p in range(position)) + chain + rest)


def inherit_split(old: State, new: State, node: LoopNode, width: int) -> None:
    """``new`` is ``old`` with loop ``node`` strip-mined into ``width`` nested loops (see
    ``loops.split`` for why every pair of instances keeps its order and each loop below keeps
    what it carries). The new loops carry nothing where ``node`` carried nothing."""
    _inherit(old, new, loop_position(old.root, node.id), set(statements_under(node)), width,
             keep_order=False)
    _inherit_order(old, new)


def inherit_permutation(old: State, new: State, top: LoopNode, width: int,
                        perm: Sequence[int] | None = None) -> None:
    """``new`` is ``old`` with the perfect chain of ``width`` loops from ``top`` permuted (new
    slot ``j`` holding old slot ``perm[j]``, when given). For a dependence none of these loops
    carries, pairs that agree above the chain agree on all of it, so they still do after the
    permutation: the verdict is unchanged. For others see ``_permuted``."""
    _inherit(old, new, loop_position(old.root, top.id), set(statements_under(top)), width,
             keep_order=True, perm=perm)


def inherit_sequence_edit(old: State, new: State) -> None:
    """Carry the per-dependence verdicts ``old`` knows over to ``new``, a tree that differs
    from it only in sequences: children moved into new sibling loops over the same values
    (``fusion.distribute``) or a new sibling inserted (``prefetch``'s copy), so that every
    statement keeps its loop expressions, in order, and only its sequence positions change.
    ``new`` may be for another program with the same statements' iterators and ``old``'s
    dependences first, in order (a prefetch adds one at the end). A verdict is passed on where
    ``transfer_verdict`` can prove it from the items alone; the others are computed when asked."""
    old_memo, memo = old.memo, new.memo
    assert old_memo is not None and memo is not None
    old_items = dict(shape(old.program, old.root))
    new_items = dict(shape(new.program, new.root))
    for k, d in enumerate(old.deps):
        if d.source not in new_items or d.sink not in new_items:
            continue
        new_key = _dep_key(k, new_items[d.source], new_items[d.sink])
        if new_key in memo.verdicts:
            continue
        old_key = _dep_key(k, old_items[d.source], old_items[d.sink])
        v = old_memo.verdicts.get(old_key)
        if v is None:
            continue
        got = transfer_verdict(old_key[1:], new_key[1:], v)
        if got is not None:
            memo.verdicts[new_key] = got


def record_first_in_sequence(state: State, k: int) -> bool:
    """Record the verdict of ``deps[k]`` without computing it, for a dependence whose instance
    pairs agree on every loop the two ends share and whose source sits at an earlier position
    of the sequence below them: not broken, carried by none of those loops. The caller vouches
    for the agreement (a prefetch's copy and the reads of what it copied share the outer loop
    values by construction); the items must have the form (both ends under the same loops and
    sequence positions, the cut key ending at their two positions, the source's the smaller).
    Returns whether it was recorded."""
    memo = state.memo
    assert memo is not None
    items = dict(shape(state.program, state.root))
    d = state.deps[k]
    key = _dep_key(k, items[d.source], items[d.sink])
    _, ka, kb = key
    if not (ka and len(ka) == len(kb) and isinstance(ka[-1], int) and isinstance(kb[-1], int)
            and ka[-1] < kb[-1] and all(x == y if isinstance(x, int) else isinstance(y, LoopExpr)
                                        for x, y in zip(ka[:-1], kb[:-1]))):
        return False
    memo.verdicts.setdefault(key, Verdict(False, (False,) * (len(ka) - 1) + (True,)))
    return True


def _columns(a: tuple, b: tuple) -> list[tuple[int, object, object]]:
    """The (position, source item, sink item) of a dependence's key items, without the
    columns where both ends sit at one sequence position (their delta is 0 for every pair)."""
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return [(p, x, y) for p, (x, y) in enumerate(zip(a, b))
            if not (isinstance(x, int) and isinstance(y, int) and x == y)]


def transfer_verdict(old: tuple[tuple, tuple], new: tuple[tuple, tuple], v: Verdict
                     ) -> Verdict | None:
    """The verdict of a dependence for the (cut, ``_dep_key``) items ``new`` of its two ends,
    given verdict ``v`` for the items ``old`` of the same statements, when the items alone
    decide it; else None.

    Proof. The time deltas of a dependence are the sink's schedule vector minus the source's
    over its instance pairs. A column where both ends have the same sequence position is 0 in
    every delta: it changes neither the lexicographic sign of any delta nor which pairs agree
    before a column, and no loop sits there (carried: False). Dropping these columns from both
    item lists, if what is left of ``new`` is what is left of ``old`` column for column (the
    same pair of loop expressions: the same delta values; or two sequence positions whose
    difference has the same sign: a constant of that sign in every delta), then the two delta
    sets are the same up to zero columns and the scaling of constant columns, which no
    lexicographic question can tell apart: same order verdict, and each column carries what
    its old column carried.

    The one other case: ``new`` ends (it is cut there) in sequence positions that differ by a
    constant ``c`` (statements moved into different sibling loops) right after a prefix of
    ``old``'s columns. Pairs that agree on that prefix are then decided by ``c``: some pair
    is reversed if ``c < 0`` and such pairs exist, and the column carries the dependence if
    they exist. When ``old`` is not broken (no delta lexicographically <= 0, so none negative
    on the prefix), every pair agreeing on the prefix differs at a later column of ``old``,
    where it is carried: such pairs exist exactly when a later column of ``old`` carries."""
    ca, cb = _columns(*old), _columns(*new)
    if len(cb) > len(ca) + 1:
        return None
    carried: dict[int, bool | None] = {}
    for (p, x, y), (q, x2, y2) in zip(ca, cb):
        same = (x, y) == (x2, y2) if isinstance(x, LoopExpr) or isinstance(y, LoopExpr) else (
            isinstance(x2, int) and isinstance(y2, int) and (y > x) == (y2 > x2))
        if not same:
            break
        carried[q] = v.carries(p)
    else:
        if len(cb) == len(ca):
            n = max(len(new[0]), len(new[1]))
            return Verdict(v.broken, tuple(carried.get(q, False) for q in range(n)))
    m = len(carried)          # the columns before ``new``'s last one matched
    if m != len(cb) - 1 or v.broken:
        return None
    q, x, y = cb[-1]
    if not (isinstance(x, int) and isinstance(y, int)):
        return None
    later = [v.carries(p) for p, _, _ in ca[m:]]
    if None in later:
        return None
    rest = any(later)
    flags = tuple(carried.get(k, False) for k in range(q)) + (rest,)
    return Verdict(rest and y < x, flags)


def _inherit_order(old: State, new: State) -> None:
    memo = new.memo
    assert memo is not None
    old_sig = shape(old.program, old.root)
    if old_sig in memo.order:
        memo.order.setdefault(shape(new.program, new.root), memo.order[old_sig])
