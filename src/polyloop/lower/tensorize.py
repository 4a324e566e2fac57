# SPDX-License-Identifier: Apache-2.0
"""Lowering of ``tensorize``: a marked loop nest becomes ``if (full tile) call else loops``.

The nest is matched again against the final program (storage placement may have changed a
temporary's shape, hence its strides). isl proved at schedule time that, with the outer loops
fixed, the nest is a box; so isl's AST for it is a chain of loops whose bounds depend on the
outer loops only, and the tile is full exactly when each loop's trip count equals the
intrinsic's extent on that axis. Partial tiles keep the loops isl wrote.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import BuildError, ScheduleError
from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, Load, Var, binop, loads, substitute, walk
from ..ir.loop_notes import NoteKey
from ..ir.loops import Call, For, If, Node, Region, Store, map_children
from ..ir.program import Program
from ..ir.simplify import simplify
from ..poly.tree import Root
from ..schedule.intrin_registry import lookup
from ..schedule.tensorize import Match, marked_loops, match, nest_part
from .function import function_kernel


def apply_tensorize(program: Program, root: Root, body: Node) -> Node:
    """``body`` with each loop marked by tensorize replaced by a call for full tiles."""
    marked = marked_loops(root)
    if not marked:
        return body
    matches: dict[int, Match] = {}
    for loop_id, name in marked.items():
        try:
            m = match(program, root, loop_id, lookup(name))
        except ScheduleError as e:
            raise BuildError(f"tensorize with '{name}' no longer applies after the later "
                             f"schedule steps: {e}") from None
        matches[loop_id] = m
    return _rewrite(body, matches)


def _rewrite(node: Node, matches: dict[int, Match]) -> Node:
    if isinstance(node, For):
        part = nest_part(node.annotations)
        if part is not None and part[0] in matches:
            # the outermost loop isl wrote for the nest (one of extent 1 has none)
            return _call_or_loops(node, matches[part[0]])
    return map_children(node, lambda c: _rewrite(c, matches))


def _unmarked(loop: For) -> For:
    kept = tuple((k, v) for k, v in loop.annotations if k != NoteKey.TENSORIZE_LOOP)
    return replace(loop, annotations=kept)


def _loops_only(loop: For, why: str) -> Node:
    ann = tuple((k, v) for k, v in loop.annotations
                if k not in (NoteKey.TENSORIZE, NoteKey.TENSORIZE_LOOP))
    top = replace(loop, annotations=ann + ((NoteKey.TENSORIZE_FALLBACK, why),))
    return map_children(top, _strip_parts)


def _strip_parts(node: Node) -> Node:
    node = _unmarked(node) if isinstance(node, For) else node
    return map_children(node, _strip_parts)


def _call_or_loops(loop: For, m: Match) -> Node:
    top = nest_part(loop.annotations)[0]  # type: ignore[index]
    chain: list[For] = [loop]
    while isinstance(chain[-1].body, For) and (nest_part(chain[-1].body.annotations) or
                                               (None,))[0] == top:
        chain.append(chain[-1].body)  # type: ignore[arg-type]
    store = chain[-1].body
    if not isinstance(store, Store) or store.statement != m.statement:
        return _loops_only(loop, "loops (no full tile)")
    present = [nest_part(f.annotations)[1] for f in chain]  # type: ignore[index]
    # isl writes no loop for one that has exactly one iteration here: a full tile only on an
    # axis of extent 1 or of symbolic extent (trip count 1)
    missing = [m.axis_of_loop[t] for t in range(len(m.loops)) if t not in present]
    if any(m.intrin.extents[a] not in (None, 1) for a in missing):
        return _loops_only(loop, "loops (no full tile)")
    inner = {f.var for f in chain}
    for f in chain:
        used = {v.name for e in (f.start, f.stop) for v in walk(e) if isinstance(v, Var)}
        if used & inner or f.step != 1:
            raise BuildError(f"tensorize: isl wrote loop '{f.var}' with bounds that depend on "
                             "the nest itself; cannot test for full tiles exactly")
    trips = [simplify(binop(BinOpKind.SUB, f.stop, f.start)) for f in chain]
    extents = m.intrin.extents
    conds: list[Expr] = []
    symbolic: dict[int, Expr] = {a: Const(1, INDEX, weak=True) for a in missing
                                 if m.intrin.extents[a] is None}
    # a test only on symbolic trip counts being positive: where it fails, a loop of the
    # nest runs no iteration, so the loops have nothing to do
    only_nonempty = True
    for trip, axis in zip(trips, [m.axis_of_loop[t] for t in present]):
        want = extents[axis]
        if want is None:
            symbolic[axis] = trip
        if isinstance(trip, Const):  # decided here: no test in the code
            if (trip.value > 0) if want is None else (trip.value == want):
                continue
            return _loops_only(loop, "loops (no full tile)")
        only_nonempty = only_nonempty and want is None
        conds.append(binop(BinOpKind.GT, trip, 0) if want is None
                     else binop(BinOpKind.EQ, trip, want))
    generated = function_kernel(m.intrin) if m.intrin.generated else None
    call = Call(m.intrin.name, _arguments(chain, store, m, symbolic), m.intrin.source,
                statement=m.statement, implementation=generated)
    if not conds:
        return call
    test = conds[0]
    for c in conds[1:]:
        test = binop(BinOpKind.AND, test, c)
    if only_nonempty:
        return If(simplify(test), call, None)
    return If(simplify(test), call, _loops_only(loop, "partial tiles"))


def _arguments(chain: list[For], store: Store, m: Match, symbolic: dict[int, Expr]
               ) -> tuple[Region | Expr, ...]:
    first = {f.var: f.start for f in chain}
    accesses: list[Load] = [Load(store.buffer, store.indices, store.value.dtype)]
    accesses += loads(store.value)
    regions: list[Region | Expr] = []
    for op in m.operands:
        ld = accesses[op.access]
        regions.append(Region(ld.buffer, tuple(simplify(substitute(i, first))
                                                for i in ld.indices)))
    strides: list[Region | Expr] = [s for op in m.operands for s in op.strides]
    counts = [symbolic[a] for a in sorted(symbolic)]
    return tuple(regions + strides + counts)
