# SPDX-License-Identifier: Apache-2.0
"""The immutable state behind a Schedule and the tree edits the primitives share.

A state is a Program, its loop tree, and the dependences every later schedule must respect
(computed once against the order in which the program is known to be correct).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..ir.program import Program
from ..poly import deps as deps_mod
from ..poly import legality
from ..poly.isl_text import iterator_expr
from ..poly.order import original_tree
from ..poly.tree import (LoopNode, Node, Root, StmtNode, flat_schedule, loop_position, loops,
                         path_to, schedule_items, statement_schedule, statements_under)


class Memo:
    """Answers that depend only on a program, its dependences and the schedule's shape
    (sequence positions and loop expressions, not loop kinds or names), shared by every state
    derived from one another by tree edits (``State.with_root``): the flat schedule, each
    dependence's verdict (``Verdict``, from one delta set) and the verdicts per state and loop.
    Setting a loop kind, renaming or
    re-checking a loop costs a dictionary look-up."""
    __slots__ = ("program", "deps", "schedules", "maps", "verdicts", "order", "carried")

    def __init__(self, program: Program, deps: deps_mod.Dependences, like: Memo | None = None):
        self.program, self.deps = program, deps
        # the schedules depend on the program alone: shared with a memo for other dependences
        same = like is not None and like.program is program
        self.schedules: dict[tuple, dict] = like.schedules if same else {}  # type: ignore[union-attr]
        self.maps: dict[tuple, object] = like.maps if same else {}  # type: ignore[union-attr]
        self.verdicts: dict[tuple, Verdict] = {}
        self.order: dict[tuple, legality.Violation | None] = {}
        self.carried: dict[tuple, legality.Violation | None] = {}

    def serves(self, program: Program, deps: deps_mod.Dependences) -> bool:
        return self.program is program and self.deps is deps


@dataclass(frozen=True, slots=True, eq=False)
class State:
    program: Program
    root: Root
    deps: deps_mod.Dependences
    next_id: int
    memo: Memo | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.memo is None or not self.memo.serves(self.program, self.deps):
            object.__setattr__(self, "memo", Memo(self.program, self.deps, self.memo))

    # queries ---------------------------------------------------------------------------------
    def loop(self, loop_id: int) -> LoopNode | None:
        for n in loops(self.root):
            if n.id == loop_id:
                return n
        return None

    def path(self, loop_id: int) -> list[LoopNode]:
        p = path_to(self.root, loop_id)
        assert p is not None
        return p

    def stmt_path(self, stmt: str) -> list[LoopNode]:
        """The loops enclosing a statement, outermost first."""
        def go(n: Node | Root, acc: list[LoopNode]) -> list[LoopNode] | None:
            if isinstance(n, StmtNode):
                return acc if n.statement == stmt else None
            here = acc + [n] if isinstance(n, LoopNode) else acc
            for c in n.children:
                r = go(c, here)
                if r is not None:
                    return r
            return None
        r = go(self.root, [])
        assert r is not None, stmt
        return r

    def schedule_map(self):
        """``tree.flat_schedule`` of this state (shared by states of the same shape)."""
        return self._schedule(shape(self.program, self.root))

    def _schedule(self, sig: tuple) -> dict:
        memo = self.memo
        assert memo is not None
        fs = memo.schedules.get(sig)
        if fs is None:
            prog = self.program
            fs = {}
            for s, items in sig:
                st = prog.statement(s)
                fs[s] = statement_schedule(tuple(prog.params), s, tuple(st.iters), st.domain,
                                           items)
            memo.schedules[sig] = fs
        return fs

    # edits -----------------------------------------------------------------------------------
    def with_root(self, root: Root, next_id: int | None = None) -> State:
        return replace(self, root=root, next_id=self.next_id if next_id is None else next_id)


def initial(program: Program) -> State:
    """The default schedule: one loop nest per statement, in program order (or the program's
    own imperfect nests, when it was written as loops)."""
    root, nid = original_tree(program)
    return _reference(program, root, nid)


def _reference(program: Program, root: Root, next_id: int) -> State:
    """The state whose order the dependences are computed against. ``deps.compute`` keeps
    only the instance pairs this order runs source strictly before sink, so the order breaks
    none of them: the verdict is recorded instead of re-derived (its schedule maps too)."""
    fs = flat_schedule(program, root)
    state = State(program, root, deps_mod.compute(program, fs), next_id)
    memo = state.memo
    assert memo is not None
    sig = shape(program, root)
    memo.schedules.setdefault(sig, fs)
    memo.order.setdefault(sig, None)
    return state


def identity_expr(program: Program, stmt: str, iterator: str) -> str:
    s = program.statement(stmt)
    return iterator_expr(s.name, s.iters, iterator)


def rebase(state: State, program: Program, root: Root) -> State:
    """A state for a rewritten program whose meaning equals the old one under the old order:
    its dependences are recomputed against the current (legal) order."""
    return _reference(program, root, state.next_id)


def replace_node(root: Root, loop_id: int, new: Node | tuple[Node, ...] | None) -> Root:
    """Replace the loop ``loop_id`` by ``new`` (a node, several siblings, or nothing)."""
    def go(kids: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for c in kids:
            if isinstance(c, LoopNode) and c.id == loop_id:
                if new is None:
                    continue
                out.extend(new if isinstance(new, tuple) else (new,))
            elif isinstance(c, LoopNode):
                out.append(c.with_children(go(c.children)))
            else:
                out.append(c)
        return tuple(out)
    return Root(go(root.children))


def map_tree(root: Root, fn) -> Root:
    """Rebuild the tree bottom-up; fn(node) returns a node, a tuple of nodes, or None to drop."""
    def go(kids: tuple[Node, ...]) -> tuple[Node, ...]:
        out: list[Node] = []
        for c in kids:
            if isinstance(c, LoopNode):
                c = c.with_children(go(c.children))
            r = fn(c)
            if r is None:
                continue
            out.extend(r if isinstance(r, tuple) else (r,))
        return tuple(out)
    return Root(go(root.children))


def remove_statements(root: Root, names: set[str]) -> Root:
    """Drop statements (and their expressions in loops); loops left empty disappear."""
    def fn(n: Node):
        if isinstance(n, StmtNode):
            return None if n.statement in names else n
        if not n.children:
            return None
        exprs = tuple((s, e) for s, e in n.exprs if s not in names)
        return replace(n, exprs=exprs)
    return map_tree(root, fn)


def insert_children(root: Root, parent_id: int | None, nodes: tuple[Node, ...], *,
                    index: int | None = None) -> Root:
    """Insert ``nodes`` among the children of loop ``parent_id`` (None: the root)."""
    if parent_id is None:
        kids = list(root.children)
        at = len(kids) if index is None else index
        return Root(tuple(kids[:at]) + nodes + tuple(kids[at:]))

    def fn(n: Node):
        if isinstance(n, LoopNode) and n.id == parent_id:
            kids = list(n.children)
            at = len(kids) if index is None else index
            return n.with_children(tuple(kids[:at]) + nodes + tuple(kids[at:]))
        return n
    return map_tree(root, fn)


def add_exprs(root: Root, additions: dict[int, tuple[tuple[str, str], ...]],
              parts: dict[int, dict[str, tuple[str, ...]]] | None = None) -> Root:
    """Give loops expressions for statements newly placed below them (and, for fused loops,
    the values of the loops they were fused from, when known: see ``tree.Collapse``)."""
    def fn(n: Node):
        if isinstance(n, LoopNode) and n.id in additions:
            new = replace(n, exprs=n.exprs + additions[n.id])
            known = (parts or {}).get(n.id, {})
            if n.collapse is not None and all(s in known for s, _ in additions[n.id]):
                more = tuple((s, e, known[s]) for s, e in additions[n.id])
                new = replace(new, collapse=replace(n.collapse, parts=n.collapse.parts + more))
            return new
        return n
    return map_tree(root, fn)


def inner_loops(state: State, node: LoopNode) -> list[LoopNode]:
    """The loops below ``node`` that really iterate: loops of one iteration once the loops
    around them are fixed (the nests of statements moved here by compute_at) do not count."""
    from ..poly.affine import fixed_by
    found: list[LoopNode] = []

    def go(n: Node, outer: list[LoopNode]) -> None:
        if not isinstance(n, LoopNode):
            return
        if not all(fixed_by(state.program, s, [o.expr(s) for o in outer], n.expr(s))
                   for s in statements_under(n)):
            found.append(n)
        for c in n.children:
            go(c, outer + [n])
    path = state.path(node.id)
    for c in node.children:
        go(c, path)
    return found


# legality ----------------------------------------------------------------------------------------

_EXCLUSIVE = (LoopKind.PARALLEL, LoopKind.VECTORIZED, LoopKind.THREAD)


def shape(program: Program, root: Root) -> tuple:
    """What the flat schedule of ``root`` depends on: for each statement, its sequence
    positions and loop expressions, outermost first, padded with zeros as in
    ``tree.flat_schedule``. Equal shapes give equal flat schedules. Remembered for the last
    few (program, tree) pairs: both are immutable, and the legality checks of one primitive
    ask for the same tree's shape many times."""
    key = (id(program), id(root))
    got = _SHAPES.get(key)
    if got is not None and got[0] is program and got[1] is root:
        return got[2]
    sig = tuple(schedule_items(program, root).items())
    if len(_SHAPES) >= 256:
        _SHAPES.clear()
    _SHAPES[key] = (program, root, sig)     # held alive: the ids stay theirs
    return sig


_SHAPES: dict[tuple[int, int], tuple[Program, Root, tuple]] = {}


class _LazySchedule(Mapping):
    """The state's flat schedule, computed only if asked for: the legality checks read it
    only to describe a violation (their verdicts come from the cached time deltas)."""

    def __init__(self, state: State, sig: tuple):
        self._state, self._sig = state, sig

    def _get(self) -> dict:
        return self._state._schedule(self._sig)

    def __getitem__(self, stmt: str):
        return self._get()[stmt]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the time deltas of one dependence say about a schedule (``legality.verdicts``):
    ``broken``, some pair runs in the wrong order or at once; ``carried[p]``, a loop at flat
    dimension ``p`` carries the dependence (None: not known, dimensions past the end: no)."""
    broken: bool
    carried: tuple[bool | None, ...]

    def carries(self, pos: int) -> bool | None:
        return self.carried[pos] if pos < len(self.carried) else False


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
            and ka[-1] < kb[-1] and all(x == y if isinstance(x, int) else isinstance(y, str)
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
        same = (x, y) == (x2, y2) if isinstance(x, str) or isinstance(y, str) else (
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


def verify(state: State, primitive: str) -> None:
    """Raise ScheduleError unless every dependence is respected and no parallel loop carries one."""
    v = check_order(state)
    if v is not None:
        raise ScheduleError(f"{primitive} would break {v.summary()}: {v.describe()}, but after "
                            "it the two would run in the opposite order (or at once). "
                            "Dependences must keep their order.", dependence=v.evidence())
    _check_nesting(state, primitive)
    for n in loops(state.root):
        if n.kind in _EXCLUSIVE:
            bad = check_parallel(state, n)
            if bad is not None:
                raise ScheduleError(f"{primitive} would make {n.kind.value} loop '{n.name}' carry "
                                    f"{bad.summary()}: {bad.describe()}",
                                    dependence=bad.evidence())


def _check_nesting(state: State, primitive: str) -> None:
    """A vector loop runs its iterations in lockstep lanes of one thread: no loop inside it may
    start threads (OpenMP forbids a parallel region inside a simd loop; a GPU index cannot vary
    within a lane)."""
    for outer in loops(state.root):
        if outer.kind is not LoopKind.VECTORIZED:
            continue
        for inner in loops(outer):
            if inner is not outer and inner.kind in (LoopKind.PARALLEL, LoopKind.THREAD):
                raise ScheduleError(
                    f"{primitive} would put {inner.kind.value} loop '{inner.name}' inside "
                    f"vectorized loop '{outer.name}', whose iterations run as lanes of one "
                    "thread; keep vectorized loops innermost (vectorize the inner loop, or "
                    "reorder before marking loops parallel/vectorized)")


def check_order(state: State) -> legality.Violation | None:
    """The first dependence the state's order breaks (remembered per schedule shape)."""
    memo = state.memo
    assert memo is not None
    sig = shape(state.program, state.root)
    if sig not in memo.order:
        by_stmt = dict(sig)

        def broken(k: int, d: deps_mod.Dependence) -> bool:
            return verdict(state, k, d, by_stmt[d.source], by_stmt[d.sink]).broken
        memo.order[sig] = legality.check_order(state.program, state.deps,
                                               _LazySchedule(state, sig), broken)
    return memo.order[sig]


def _carried_key(state: State, node: LoopNode, sig: tuple | None = None) -> tuple:
    """What the verdict of ``check_parallel`` for ``node`` depends on: the loop's position,
    its statements and the shape of their schedules up to it."""
    pos = loop_position(state.root, node.id)
    by_stmt = dict(sig if sig is not None else shape(state.program, state.root))
    return (pos, tuple(sorted((s, by_stmt[s][:pos + 1]) for s in statements_under(node))))


def check_parallel(state: State, node: LoopNode) -> legality.Violation | None:
    """The first dependence the loop ``node`` carries (remembered per statement set, position
    and the shape of the schedule up to that loop)."""
    memo = state.memo
    assert memo is not None
    sig = shape(state.program, state.root)
    pos = loop_position(state.root, node.id)
    stmts = statements_under(node)
    by_stmt = dict(sig)
    key = _carried_key(state, node, sig)
    if key not in memo.carried:
        def carried(k: int, d: deps_mod.Dependence) -> bool:
            return bool(verdict(state, k, d, by_stmt[d.source], by_stmt[d.sink], pos)
                        .carries(pos))
        memo.carried[key] = legality.check_parallel(state.program, state.deps,
                                                    _LazySchedule(state, sig), set(stmts), pos,
                                                    carried)
    return memo.carried[key]
