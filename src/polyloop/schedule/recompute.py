# SPDX-License-Identifier: Apache-2.0
"""Recomputation: evaluate a value (a producer block's, or a substitution rule's body) into a
temporary once per iteration of a consumer's outer loops, for exactly the elements that
iteration reads, and let the consumers read the temporary.

This is what ``compute_at(..., recompute=True)`` and ``pl.precompute`` do. Unlike
``compute_at`` (each element computed once, by the first iteration that needs it), iterations
whose footprints overlap (a convolution's halo) each compute their own copy, so no value
flows from one iteration of the outer loops to another: those loops stay parallel (OpenMP
threads, GPU work-groups). The temporary is indexed by the outer loop values as well, so the
rewritten program means the same whatever the storage; lowering shrinks it to one box per
iteration (``poly.storage``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import ScheduleError
from ..ir.dtypes import DType
from ..ir.expr import BinOpKind, Expr, Load, Var, binop, rewrite, substitute
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.simplify import simplify
from ..poly import affine, regions, storage
from ..poly.launch import loop_upper_bound
from ..poly.isl_text import iterator_expr
from ..poly.recompute import dim_bounds, recompute_domain
from ..poly.tree import LoopNode, Node, StmtNode, statements_under
from ..poly.tree_edits import add_exprs, insert_children, remove_statements
from .blocks import block_statements, readers
from .state import State, rebase
from .verdicts import verify


@dataclass(frozen=True, slots=True)
class Recomputation:
    """What to recompute: ``value`` builds the value of element ``dims`` (one ``Var`` per
    index) of ``buffer``, whose loads in ``consumers`` are redirected to a temporary named
    ``name``; ``within`` limits the elements to a producer's domain; ``drop`` names
    statements (and buffers) the recomputation makes dead."""
    buffer: str
    consumers: tuple[str, ...]
    value: Callable[[list[Expr]], Expr]
    dtype: DType
    name: str
    scope: MemScope
    within: str | None = None
    drop_statements: tuple[str, ...] = ()
    drop_buffers: tuple[str, ...] = ()
    dim_names: tuple[str, ...] | None = None
    reads: frozenset[str] = frozenset()      # buffers ``value`` reads
    statement: str | None = None             # the copy's name (default: ``name``)

    @property
    def copy_name(self) -> str:
        return self.statement or self.name


def recompute(state: State, what: Recomputation, outer: Sequence[LoopNode], primitive: str
              ) -> tuple[State, list[int]]:
    """The state with ``what`` recomputed at the start of each iteration of ``outer`` (the
    consumers' outermost loops, outermost first; empty: once, before the consumers' nest).
    Returns it and the ids of the new copy loops."""
    program = state.program
    _check_inputs_stable(state, what, primitive)
    first = what.consumers[0]
    o_names = _outer_names(program, list(outer), what.name)
    ndim = _ndim(program, what)
    dims = list(what.dim_names or [f"{what.name}_dim_{k}" for k in range(ndim)])
    if len(dims) != ndim or len(set(dims + o_names)) != len(dims + o_names) or \
            any(d in program.params for d in dims):
        raise ScheduleError(f"{primitive}: give {ndim} new, distinct index names")
    exprs = {c: [n.expr(c) for n in outer] for c in what.consumers}
    extents = []
    for n, e in zip(outer, exprs[first]):
        lo, _ = affine.value_range(program, first, e)
        if lo is None or lo < 0:
            raise ScheduleError(f"{primitive}: loop '{n.name}' may take negative values; "
                                "recompute at a loop that counts from 0")
        extents.append(loop_upper_bound(program, first, e))
    cname = what.copy_name
    dom = recompute_domain(program, exprs, what.buffer, cname, o_names, dims, what.within)
    bounds = dim_bounds(program, dom, len(outer))
    shape = tuple(extents) + tuple(simplify(binop(BinOpKind.SUB, hi, lo)) for lo, hi in bounds)
    temp = Buffer(what.name, shape, what.dtype, BufferRole.TEMP, what.scope)
    shifted = [simplify(binop(BinOpKind.SUB, Var(d), lo)) for d, (lo, _) in zip(dims, bounds)]
    copy = Statement(cname, tuple(o_names + dims), dom, what.name,
                     tuple(Var(o) for o in o_names) + tuple(shifted),
                     what.value([Var(d) for d in dims]), block=cname)
    new_program = _rewritten(program, what, copy, temp, exprs, [lo for lo, _ in bounds])
    root = remove_statements(state.root, set(what.drop_statements))
    root = add_exprs(root, {n.id: ((cname, iterator_expr(cname, o_names + dims, o)),)
                            for n, o in zip(outer, o_names)}, params=program.params)
    loop_exprs = storage.fetch_loop_exprs(dom, len(outer))
    nid = state.next_id
    ids = list(range(nid, nid + len(dims)))
    nest: Node = StmtNode(cname)
    for k in reversed(range(len(dims))):
        nest = LoopNode(ids[k], dims[k], ((cname, loop_exprs[k]),), (nest,))
    parent = outer[-1].id if outer else None
    siblings = root.children if not outer else _loop(root, outer[-1].id).children
    at = next(k for k, c in enumerate(siblings)
              if set(statements_under(c)) & set(what.consumers))
    root = insert_children(root, parent, (nest,), index=at)
    new = rebase(state.with_root(root, nid + len(dims)), new_program, root)
    verify(new, primitive)
    return new, ids


def _loop(root, loop_id: int) -> LoopNode:
    stack: list = list(root.children)
    while stack:
        n = stack.pop()
        if isinstance(n, LoopNode):
            if n.id == loop_id:
                return n
            stack.extend(n.children)
    raise ScheduleError(f"loop #{loop_id} is not in the schedule")


def _ndim(program: Program, what: Recomputation) -> int:
    for s in what.consumers:
        for ld in program.statement(s).reads():
            if ld.buffer == what.buffer:
                return len(ld.indices)
    raise ScheduleError(f"nothing reads '{what.buffer}'")


def _outer_names(program: Program, outer: list[LoopNode], name: str) -> list[str]:
    """The outer loops' names as iterators of the copy (renamed where a name is taken)."""
    out: list[str] = []
    for n in outer:
        x = n.name
        while x in program.params or x in out:
            x = f"{x}_{name}"
        out.append(x)
    return out


def _check_inputs_stable(state: State, what: Recomputation, primitive: str) -> None:
    """The value is computed earlier than the consumers evaluated it (or later than the
    producer did): nothing in between may write what it reads. Checked coarsely: no
    statement of the top-level nests from the producer's to the consumers' writes it."""
    kids = state.root.children
    tops = [k for k, c in enumerate(kids)
            if set(statements_under(c)) & (set(what.consumers) | set(what.drop_statements))]
    span = {s for c in kids[min(tops):max(tops) + 1] for s in statements_under(c)}
    skip = set(what.drop_statements)
    bad = sorted(s.name for s in state.program.statements
                 if s.name in span and s.name not in skip and s.buffer in what.reads)
    if bad:
        stmt = state.program.statement(bad[0])
        raise ScheduleError(f"{primitive}: {', '.join(bad)} write '{stmt.buffer}' in the loop "
                            f"nest where the value of '{what.buffer}' would be recomputed from "
                            "it; the recomputed values could differ. Recompute before that "
                            "nest or keep the value stored")


def _rewritten(program: Program, what: Recomputation, copy: Statement, temp: Buffer,
               exprs: dict[str, list[str]], lows: list[Expr]) -> Program:
    statements = []
    for s in program.statements:
        if s.name in what.drop_statements:
            continue
        if s.name == what.consumers[0]:
            statements.append(copy)
        if s.name in what.consumers:
            values = tuple(regions.loop_value_expr(program, s.name, e) for e in exprs[s.name])

            def redirect(e: Expr, values=values) -> Expr | None:
                if isinstance(e, Load) and e.buffer == what.buffer:
                    idx = tuple(simplify(binop(BinOpKind.SUB, i, lo))
                                for i, lo in zip(e.indices, lows))
                    return Load(what.name, values + idx, e.dtype, e.weak)
                return None
            s = Statement(s.name, s.iters, s.domain, s.buffer, s.indices,
                          rewrite(s.value, redirect), s.reduction, s.block, s.is_init)
        statements.append(s)
    dead = set(what.drop_buffers) | {what.buffer}
    buffers = tuple(b for b in program.buffers if b.name != temp.name and (
        b.name not in dead or _still_read(b.name, statements))) + (temp,)
    return program.replace(statements=tuple(statements), buffers=buffers, nesting=())


def _still_read(buffer: str, statements: list[Statement]) -> bool:
    return any(s.buffer == buffer or any(ld.buffer == buffer for ld in s.reads())
               for s in statements)


def compute_at_recompute(state: State, block: str, loop: LoopNode) -> State:
    """``compute_at(block, loop, recompute=True)``: the producer's values are computed again
    in every iteration of ``loop`` (and the loops around it) for the elements that iteration
    reads, into a temporary of its own; the producer's buffer disappears. The producer is one
    statement ``B[x, y] = f(x, y)`` (no reduction) writing a temporary."""
    producers = block_statements(state, block)
    if len(producers) != 1 or producers[0].reduction is not None:
        raise ScheduleError(f"compute_at(recompute=True): block '{block}' must be one statement "
                            "without a reduction (a reduction's partial results cannot be "
                            "recomputed per iteration); use compute_at without recompute")
    p = producers[0]
    buf = state.program.buffer(p.buffer)
    if buf.role is not BufferRole.TEMP:
        raise ScheduleError(f"compute_at(recompute=True): block '{block}' writes '{buf.name}', an "
                            "argument of the program; only a temporary can be recomputed")
    if [str(i) for i in p.indices] != list(p.iters) or \
            not all(isinstance(i, Var) for i in p.indices):
        raise ScheduleError(f"compute_at(recompute=True): block '{block}' must write "
                            f"'{buf.name}' at its own iterators ({', '.join(p.iters)}), got "
                            f"[{', '.join(str(i) for i in p.indices)}]")
    if any(ld.buffer == buf.name for ld in p.reads()):
        raise ScheduleError(f"compute_at(recompute=True): block '{block}' reads '{buf.name}', "
                            "which it writes; only a value of other buffers can be recomputed")
    under = set(statements_under(loop))
    consumers = readers(state, buf.name, {p.name})
    outside = [c for c in consumers if c not in under]
    if outside or not consumers:
        where = f"also read by {', '.join(outside)} outside" if outside else "read by nothing in"
        raise ScheduleError(f"compute_at(recompute=True): '{buf.name}' is {where} loop "
                            f"'{loop.name}'; recompute at a loop around all its readers")
    path = state.path(loop.id)
    what = Recomputation(
        buf.name, tuple(c for c in (s.name for s in state.program.statements) if c in consumers),
        lambda dims: substitute(p.value, dict(zip(p.iters, dims))), buf.dtype, buf.name,
        MemScope.SHARED if _items_below(state, loop, consumers) else
        (buf.scope if buf.scope is not MemScope.GLOBAL else MemScope.LOCAL),
        within=p.domain, drop_statements=(p.name,), drop_buffers=(buf.name,),
        reads=frozenset(ld.buffer for ld in p.reads()), statement=p.name)
    new, _ = recompute(state, what, path, "compute_at(recompute=True)")
    return new


def under_work_items(state: State, loop: LoopNode) -> bool:
    """Is ``loop`` a work-item loop or inside one?"""
    return any(n.thread is not None and n.thread.is_item for n in state.path(loop.id))


def _items_below(state: State, loop: LoopNode, consumers: Sequence[str]) -> bool:
    """Do the consumers run on several work-items below ``loop`` (the copy is then shared
    by the work-group: local memory)?"""
    depth = len(state.path(loop.id))
    return any(n.thread is not None and n.thread.is_item
               for c in consumers for n in state.stmt_path(c)[depth:])


__all__ = ["Recomputation", "compute_at_recompute", "recompute", "under_work_items"]
