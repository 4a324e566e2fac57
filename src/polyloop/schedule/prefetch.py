# SPDX-License-Identifier: Apache-2.0
"""The prefetch rewrite behind ``pl.add_prefetch``: copy what a statement reads from a buffer,
for each iteration of its outer loops, into a 'shared' temporary it then reads instead.

Unlike ``cache_read`` + ``compute_at`` (each element copied once, where first needed), the copy
is redundant on purpose: every iteration of the outer loops (every work-group, every tile of a
sequential loop) fetches its own box, which is what lets the copy live in a work-group's local
memory. The temporary is indexed by the outer loop values too, so the rewritten program means
the same whatever the storage; lowering compacts it to one box (``poly.storage``).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..ir.expr import Expr, Load, Var, rewrite
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..poly import affine, regions, storage
from ..poly.launch import loop_upper_bound
from ..poly.deps import Dependences
from ..poly.isl_text import iterator_expr
from ..poly.tree import LoopNode, Root, StmtNode, statements_under
from .naming import fresh_name
from .state import State, rebase
from .verdicts import inherit_sequence_edit, record_first_in_sequence, verify
from ..poly.tree_edits import add_exprs, insert_children


def prefetch(state: State, consumer: str, buffer: str, outer: list[LoopNode], *,
             name: str | None = None, dim_names: list[str] | None = None
             ) -> tuple[State, str, list[int]]:
    """Fetch the elements of ``buffer`` that ``consumer`` reads, at the start of each iteration
    of the innermost loop of ``outer`` (the consumer's outer loops). Returns the new state, the
    name of the temporary (and copy statement) and the ids of the copy's own loops."""
    program = state.program
    src = program.buffer(buffer)
    _check_no_writers(state, consumer, buffer)
    fname = name or fresh_name(program, f"{buffer}_fetch")
    o_names = [f"{n.name}_{fname}" if n.name in program.params else n.name for n in outer]
    dims = list(dim_names or [f"{buffer}_dim_{k}" for k in range(src.ndim)])
    if len(dims) != src.ndim or len(set(dims + o_names)) != len(dims + o_names):
        raise ScheduleError(f"add_prefetch: dim_arg_names must be {src.ndim} new names")
    exprs = [n.expr(consumer) for n in outer]
    temp, copy, box = _copy_statement(program, consumer, buffer, outer, exprs, fname,
                                      o_names, dims)
    new_program = _redirected(program, consumer, buffer, temp, copy, exprs)
    root = add_exprs(state.root, {n.id: ((fname, iterator_expr(fname, o_names + dims, o)),)
                                  for n, o in zip(outer, o_names)},
                      params=program.params)
    # the loops count from the corner of every element the reads name, guarded or not, so
    # that they stay affine; the copy's domain runs them only inside the buffer
    loop_exprs = storage.fetch_loop_exprs(box, len(outer))
    nid = state.next_id
    ids = list(range(nid, nid + len(dims)))
    nest: LoopNode | StmtNode = StmtNode(fname)
    for k in reversed(range(len(dims))):
        nest = LoopNode(ids[k], dims[k], ((fname, loop_exprs[k]),), (nest,))
    root = insert_children(root, outer[-1].id, (nest,), index=0)
    new = _fetched_state(state, new_program, root, nid + len(dims), buffer, fname, consumer)
    verify(new, "add_prefetch")
    return new, fname, ids


def _check_no_writers(state: State, consumer: str, buffer: str) -> None:
    """Refuse a copy of a buffer that the consumer's loop nest writes."""
    program = state.program
    top = state.root.children.index(next(c for c in state.root.children
                                         if consumer in statements_under(c)))
    inside = set(statements_under(state.root.children[top]))
    writers = sorted({s.name for s in program.statements if s.buffer == buffer} & inside)
    if writers:
        raise ScheduleError(f"add_prefetch: '{buffer}' is written by {', '.join(writers)} in "
                            f"the loop nest of '{consumer}'; a copy would go stale")


def _copy_statement(program: Program, consumer: str, buffer: str, outer: list[LoopNode],
                    exprs: list, fname: str, o_names: list[str], dims: list[str]
                    ) -> tuple[Buffer, Statement, object]:
    """The temporary (one copy per value of the ``outer`` loops), the statement that fills it
    and the box of elements it copies."""
    src = program.buffer(buffer)
    extents = []
    for n, e in zip(outer, exprs):
        lo, hi = affine.value_range(program, consumer, e)
        if lo is not None and lo < 0:
            raise ScheduleError(f"add_prefetch: loop '{n.name}' takes negative values")
        extents.append(loop_upper_bound(program, consumer, e))
    dom, box = storage.fetch_domain(program, {consumer: exprs}, buffer, fname, o_names, dims)
    temp = Buffer(fname, tuple(extents) + src.shape, src.dtype, BufferRole.TEMP,
                  MemScope.SHARED)
    copy = Statement(fname, tuple(o_names + dims), dom, fname,
                     tuple(Var(x) for x in o_names + dims),
                     Load(buffer, tuple(Var(x) for x in dims), src.dtype), block=fname)
    return temp, copy, box


def _redirected(program: Program, consumer: str, buffer: str, temp: Buffer, copy: Statement,
                exprs: list) -> Program:
    """The program with ``copy`` before the consumer and the consumer reading the copy."""
    stmt = program.statement(consumer)
    fname = temp.name
    values = [regions.loop_value_expr(program, consumer, e) for e in exprs]

    def redirect(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == buffer:
            return Load(fname, tuple(values) + e.indices, e.dtype, e.weak)
        return None
    new_stmt = Statement(stmt.name, stmt.iters, stmt.domain, stmt.buffer, stmt.indices,
                         rewrite(stmt.value, redirect), stmt.reduction, stmt.block, stmt.is_init)
    statements = []
    for s in program.statements:
        if s.name == consumer:
            statements += [copy, new_stmt]
        else:
            statements.append(s)
    return program.replace(statements=tuple(statements),
                           buffers=program.buffers + (temp,), nesting=())


def _fetched_state(state: State, new_program: Program, root: Root, next_id: int, buffer: str,
                   fname: str, consumer: str) -> State:
    """The state after the copy, its dependences recomputed or (for a read-only buffer)
    extended by the copy's flow to the consumer."""
    program = state.program
    if any(s.buffer == buffer for s in program.statements):
        return rebase(state.with_root(root, next_id), new_program, root)
    # the copy reads a buffer nothing writes: its flow to the consumer is all that is new.
    # The copy's element indices start with the values ``o`` of the ``outer`` loops and
    # the consumer reads it at those loops' values, so a copy instance and a read of its
    # element share every outer loop value; the copy is the first child of the innermost
    # one, before the consumer's nest: every such pair runs copy first, and the
    # dependence is all of them (no schedule needed). The old dependences keep their
    # relations and the statements their loop expressions: only sequence positions
    # changed below ``outer[-1]``, so their verdicts pass on (``inherit_sequence_edit``).
    dep = storage.fetch_dependence(new_program, fname, consumer)
    deps = Dependences(tuple(state.deps) + ((dep,) if dep is not None else ()))
    new = State(new_program, root, deps, next_id)
    inherit_sequence_edit(state, new)
    if dep is not None:     # copy first, at the same outer loop values: its verdict
        record_first_in_sequence(new, len(deps) - 1)
    return new
