# SPDX-License-Identifier: Apache-2.0
"""The immutable state behind a Schedule, and the memo of answers its derived states share.

A state is a Program, its loop tree, and the dependences every later schedule must respect
(computed once against the order in which the program is known to be correct).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir.program import Program
from ..poly import deps as deps_mod
from ..poly import legality
from ..poly.isl_text import iterator_expr
from ..poly.order import original_tree
from ..poly.affine import fixed_by
from ..poly.tree import (LoopNode, Node, Root, StmtNode, flat_schedule, loops, path_to,
                         schedule_items, statement_schedule, statements_under)


class Memo:
    """Answers that depend only on a program, its dependences and the schedule's shape
    (sequence positions and loop expressions, not loop kinds or names), shared by every state
    derived from one another by tree edits (``State.with_root``): the flat schedule, each
    dependence's verdict (``Verdict``, from one delta set) and the verdicts per state and loop.
    Setting a loop kind, renaming or
    re-checking a loop costs a dictionary look-up."""
    __slots__ = ("program", "deps", "schedules", "maps", "verdicts", "order", "carried", "flows")

    def __init__(self, program: Program, deps: deps_mod.Dependences, like: Memo | None = None):
        self.program, self.deps = program, deps
        # the schedules depend on the program alone: shared with a memo for other dependences
        same = like is not None and like.program is program
        self.schedules: dict[tuple, dict] = like.schedules if same else {}  # type: ignore[union-attr]
        self.maps: dict[tuple, object] = like.maps if same else {}  # type: ignore[union-attr]
        self.verdicts: dict[tuple, Verdict] = {}
        self.order: dict[tuple, legality.Violation | None] = {}
        self.carried: dict[tuple, legality.Violation | None] = {}
        self.flows: dict[tuple, object] = {}    # (shape, buffer) -> value-based flow pairs

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


def inner_loops(state: State, node: LoopNode) -> list[LoopNode]:
    """The loops below ``node`` that really iterate: loops of one iteration once the loops
    around them are fixed (the nests of statements moved here by compute_at) do not count."""
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


def shown(state: State, node: LoopNode) -> bool:
    """Does ``print(sch)`` show the loop? Not when it has one iteration once the loops around
    it are fixed: isl leaves such a loop out of the code and prints its value instead."""
    outer = state.path(node.id)[:-1] if state.loop(node.id) is node else []
    return not all(fixed_by(state.program, s, [o.expr(s) for o in outer], node.expr(s))
                   for s in statements_under(node))


def loop_label(state: State, node: LoopNode) -> str:
    """The loop as an error names it: ``'j'``, and for a loop ``print(sch)`` does not show,
    its name and why it is not to be seen."""
    if shown(state, node):
        return f"'{node.name}'"
    return f"'{node.name}' (it has one iteration, so print(sch) shows its value, not the loop)"


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


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the time deltas of one dependence say about a schedule (``legality.verdicts``):
    ``broken``, some pair runs in the wrong order or at once; ``carried[p]``, a loop at flat
    dimension ``p`` carries the dependence (None: not known, dimensions past the end: no)."""
    broken: bool
    carried: tuple[bool | None, ...]

    def carries(self, pos: int) -> bool | None:
        return self.carried[pos] if pos < len(self.carried) else False
