# SPDX-License-Identifier: Apache-2.0
"""Tensor intrinsics and the structural match behind ``Schedule.tensorize``.

A ``TensorIntrin`` pairs a *description* (a small ``pl.compute``, e.g. a 6 x 32 x kc update
``C[i, j] += A[i, k] * B[k, j]``) with an *implementation* (C source of a function). ``match``
checks that the loop nest under a loop computes exactly the description: the same body up to a
renaming of buffers, one loop per axis with the same extent (isl: with the outer loops fixed the
nest is a box), and accesses whose strides (exact, from isl) move the same operands, contiguous
in each operand's last dimension. Lowering (``lower.tensorize``) replaces each full box by a
call and keeps the original loops for partial ones.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ScheduleError
from ..ir.dtypes import INDEX
from ..ir.expr import Const, Expr, loads
from ..ir.loop_notes import NoteKey, TensorizeMark, TensorizePart
from ..ir.program import Program, Statement
from ..ir.simplify import simplify
from ..poly.nest_shape import NestShape, nest_shape
from ..poly.tree import LoopNode, Root, StmtNode, loops, path_to
from . import loops as loop_edits
from . import state as st
from . import verdicts as vd
from .intrin_body import match_body
# the intrinsic and its registry live in intrin_registry; re-exported here, where callers look
from .intrin_registry import (BUILTIN_PREFIX, DeviceBody, TensorIntrin, lookup,  # noqa: F401
                              register_factory)  # noqa: F401

ANNOTATION = NoteKey.TENSORIZE
PART = NoteKey.TENSORIZE_LOOP   # on every loop of a tensorized nest: a TensorizePart

# --- the match ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Operand:
    """One argument region of the call: description buffer -> actual buffer and access."""
    described: str
    buffer: str
    access: int                      # 0: the written element, k: the k-th load of the body
    strides: tuple[Expr, ...]        # element strides of the description's dims but the last


@dataclass(frozen=True, slots=True)
class Match:
    intrin: TensorIntrin
    statement: str
    loops: tuple[int, ...]           # the nest's loop ids, outermost first
    axis_of_loop: tuple[int, ...]    # the description axis each loop runs
    operands: tuple[Operand, ...]    # in call order


def _chain(top: LoopNode) -> tuple[list[LoopNode], str]:
    nodes = [top]
    while True:
        kids = nodes[-1].children
        if len(kids) == 1 and isinstance(kids[0], LoopNode):
            nodes.append(kids[0])
            continue
        if len(kids) == 1 and isinstance(kids[0], StmtNode):
            return nodes, kids[0].statement
        what = ", ".join(getattr(k, "name", None) or getattr(k, "statement") for k in kids)
        raise ScheduleError(f"tensorize: loop '{nodes[-1].name}' holds {len(kids)} children "
                            f"({what}); the nest under '{top.name}' must be a perfect nest "
                            "around one statement (move other blocks out, e.g. with "
                            "decompose_reduction)")


def match(program: Program, root: Root, loop_id: int, intrin: TensorIntrin) -> Match:
    """Check that the nest under ``loop_id`` computes ``intrin``'s description; raise
    ``ScheduleError`` saying what differs."""
    path = path_to(root, loop_id)
    if path is None:
        raise ScheduleError(f"tensorize: loop #{loop_id} is not in the schedule")
    chain, stmt_name = _chain(path[-1])
    stmt = program.statement(stmt_name)
    desc = intrin.statement
    match_body(desc, stmt, intrin.name)
    names = [n.name for n in chain]
    shape = nest_shape(program, root, loop_id, stmt_name)
    want = intrin.shape
    if len(chain) != len(intrin.axes):
        raise ScheduleError(f"tensorize: the nest under '{names[0]}' has {len(chain)} loops "
                            f"({', '.join(names)}), intrinsic '{intrin.name}' has "
                            f"{len(intrin.axes)} axes ({', '.join(intrin.axes)})")
    if not shape.is_box:
        raise ScheduleError(f"tensorize: the nest under '{names[0]}' is not a rectangular box "
                            "(an inner loop's bounds depend on another inner loop)")
    for a, row in enumerate(shape.deltas):
        for t, d in enumerate(row):
            if d is None:
                raise ScheduleError(f"tensorize: access {_access(stmt, a)} has no constant "
                                    f"stride along loop '{names[t]}'")
    axes = _assign_axes(shape, want, names, intrin, stmt, program)
    for t, a in enumerate(axes):
        e_want, e_have = want.extents[a], shape.extents[t]
        if e_want is not None and e_have != e_want:
            have = "an unbounded number of" if e_have is None else f"up to {e_have}"
            raise ScheduleError(f"tensorize: loop extent differs: loop '{names[t]}' runs {have} "
                                f"iterations, axis '{intrin.axes[a]}' of intrinsic "
                                f"'{intrin.name}' has extent {e_want}; split it by {e_want}")
    operands = _operands(program, stmt, shape, want, axes, intrin.operands, names)
    return Match(intrin, stmt_name, tuple(n.id for n in chain), tuple(axes), operands)


def _access(stmt: Statement, a: int) -> str:
    return str(([stmt.target] + loads(stmt.value))[a])


def _assign_axes(shape: NestShape, want: NestShape, names: list[str], intrin: TensorIntrin,
                 stmt: Statement, program: Program) -> list[int]:
    """Each loop runs an unused axis that moves the same operands; among several, one of the
    same extent whose contiguous dimensions are contiguous in the nest, else the first."""
    def moves(s: NestShape, t: int) -> tuple[bool, ...]:
        return tuple(any(row[t]) for row in s.deltas)  # type: ignore[arg-type]

    accesses = [stmt.target] + loads(stmt.value)

    def fits(t: int, a: int) -> bool:
        if want.extents[a] is not None and want.extents[a] != shape.extents[t]:
            return False
        for k, row in enumerate(want.deltas):
            last = row[a][-1] if row[a] else 0  # type: ignore[index]
            if last:
                stride = _linear(shape.deltas[k][t], program.buffer(accesses[k].buffer).shape)  # type: ignore[arg-type]
                if not (isinstance(stride, Const) and stride.value == 1):
                    return False
        return True

    used: set[int] = set()
    out: dict[int, int] = {}
    # a loop of one iteration that moves nothing can run any axis of a symbolic extent: it
    # takes one that the other loops leave (taken in order, it could take theirs)
    spare = [t for t in range(len(names)) if shape.extents[t] == 1 and not any(moves(shape, t))]
    for t in [t for t in range(len(names)) if t not in spare] + spare:
        sig = moves(shape, t)
        candidates = [a for a in range(len(intrin.axes)) if a not in used and moves(want, a) == sig]
        if not candidates and shape.extents[t] == 1:
            candidates = [a for a in range(len(intrin.axes))
                          if a not in used and want.extents[a] in (None, 1)]
        if not candidates:
            moved = [_access(stmt, k) for k, m in enumerate(sig) if m]
            raise ScheduleError(f"tensorize: access stride differs: loop '{names[t]}' moves "
                                f"{', '.join(moved) or 'no operand'}; no axis of intrinsic "
                                f"'{intrin.name}' moves the same operands")
        fitting = [a for a in candidates if fits(t, a)] or candidates
        # an axis of the loop's own constant extent first: a symbolic one takes any loop
        a = next((a for a in fitting if want.extents[a] == shape.extents[t]), fitting[0])
        used.add(a)
        out[t] = a
    return [out[t] for t in range(len(names))]


def _linear(delta: tuple[int, ...], shape: tuple[Expr, ...]) -> Expr:
    """Element distance of an index step in a row-major buffer."""
    total: Expr = Const(0, INDEX, weak=True)
    for d, step in enumerate(delta):
        if step:
            size: Expr = Const(step, INDEX, weak=True)
            for extent in shape[d + 1:]:
                size = size * extent
            total = total + size
    return simplify(total)


def _operands(program: Program, stmt: Statement, shape: NestShape, want: NestShape,
              axes: list[int], described: tuple[str, ...], names: list[str]
              ) -> tuple[Operand, ...]:
    out = []
    loop_of_axis = {a: t for t, a in enumerate(axes)}
    for k, want_row in enumerate(want.deltas):
        actual = shape.deltas[k]
        buffer = ([stmt.target] + loads(stmt.value))[k].buffer
        ndim = len(want_row[0]) if want_row else 0  # type: ignore[arg-type]
        strides = []
        for dim in range(ndim):
            axis = next((a for a, d in enumerate(want_row) if d[dim]), None)  # type: ignore[index]
            if axis is None:
                # an axis of extent 1 indexes this dimension: only its index 0 exists
                strides.append(Const(0, INDEX, weak=True))
                continue
            t = loop_of_axis[axis]
            if shape.extents[t] == 1 and not any(actual[t]):  # type: ignore[arg-type]
                # the loop has one iteration: only index 0 of this dimension is touched
                strides.append(Const(0, INDEX, weak=True))
                continue
            stride = _linear(actual[t], program.buffer(buffer).shape)  # type: ignore[arg-type]
            if dim == ndim - 1 and not (isinstance(stride, Const) and stride.value == 1):
                raise ScheduleError(f"tensorize: access stride differs: {_access(stmt, k)} moves "
                                    f"by {stride} elements along loop '{names[t]}', the "
                                    "intrinsic needs a contiguous last dimension (stride 1); "
                                    "change the layout with transform_layout")
            strides.append(stride)
        # one region per described buffer: check_operands made them distinct
        out.append(Operand(described[k], buffer, k, tuple(strides[:-1])))
    return tuple(out)


def tensorize(state: st.State, node: LoopNode, intrin: TensorIntrin) -> st.State:
    """The state with ``node`` marked for ``intrin`` once the nest under it matches; refused
    if running the nest in the description's axis order would break a dependence."""
    m = match(state.program, state.root, node.id, intrin)
    nodes = [state.loop(i) for i in m.loops]
    in_order = [nodes[m.axis_of_loop.index(a)] for a in sorted(m.axis_of_loop)]
    if [n.id for n in in_order] != list(m.loops):  # type: ignore[union-attr]
        vd.verify(loop_edits.reorder(state, in_order),  # type: ignore[arg-type]
                  f"tensorize: intrinsic '{intrin.name}' runs the nest in the order "
                  f"{', '.join(intrin.axes)}; that")
    for t, loop_id in enumerate(m.loops):
        # every loop of the nest names it: isl writes no loop for an axis of one iteration
        # (extent 1), and lowering must still find the nest from the loops that remain
        n = state.loop(loop_id)
        ann = tuple((k, v) for k, v in n.annotations if k not in (ANNOTATION, PART))
        if t == 0:
            ann += ((ANNOTATION, TensorizeMark(intrin.name, node.id)),)
        ann += ((PART, TensorizePart(node.id, t)),)
        state = loop_edits.set_kind(state, n, n.kind, annotations=ann)  # type: ignore[arg-type]
    return state


def nest_part(annotations: tuple[tuple[str, object], ...]) -> tuple[int, int] | None:
    """(id of the tensorized loop, position in its nest) of a loop of a tensorized nest."""
    for k, v in annotations:
        if k == PART and isinstance(v, TensorizePart):
            return v.loop, v.position
    return None


def marked_loops(root: Root) -> dict[int, str]:
    """Loop id -> intrinsic name, for every loop marked by tensorize."""
    out = {}
    for n in loops(root):
        for k, v in n.annotations:
            if k == ANNOTATION and isinstance(v, TensorizeMark):
                out[n.id] = v.intrin
    return out
