# SPDX-License-Identifier: Apache-2.0
"""Cross-thread reductions: ``bind`` of a reduction loop to work-items (TVM's pattern after
``rfactor``: the reduce axis of the final stage bound to ``threadIdx.x``).

The loop carries the reduction's dependence (every iteration updates one element), so it
cannot simply run its iterations at once. The reduction is rewritten as a work-group tree
reduction, as statements of the program: each work-item accumulates into its own slot of a
temporary in local memory (``red[..., r]``, which starts at the identity), then
``log2(P)`` halving steps ``red[t] = red[t] op red[t + h]`` for ``t < h`` (``P``: the
power of two at or above the loop's extent), each on the same work-item axis, then one
work-item combines ``red[0]`` into the target. Barriers between the steps come from the
exact dependences, like any other. Sums are reassociated, as binding a reduction loop asks.
"""
from __future__ import annotations

from ..errors import ScheduleError
from dataclasses import replace

from ..ir.expr import (BinOpKind, Expr, Load, ReduceKind, Var, binop, const, free_vars,
                       reduce_identity)
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.thread_axis import ThreadAxis
from ..ir.loops import LoopKind
from ..poly import affine, regions
from ..poly.launch import loop_upper_bound
from ..poly.isl_text import instance_map, iterator_expr
from ..poly.recompute import image_domain
from ..poly.tree import LoopNode, Node, Root, StmtNode, statements_under
from ..poly.tree_edits import add_exprs, replace_node
from ..util.names import unique_name
from .naming import fresh_name
from .state import State, rebase

_COMBINE = {ReduceKind.SUM: BinOpKind.ADD, ReduceKind.PROD: BinOpKind.MUL,
            ReduceKind.MAX: BinOpKind.MAX, ReduceKind.MIN: BinOpKind.MIN}


def bind_reduction(state: State, loop: LoopNode, axis: ThreadAxis, stmt: str) -> State:
    """The state with reduction ``stmt``'s loop ``loop`` bound to work-item axis ``axis`` as
    a tree reduction (see the module). Raises ScheduleError naming what stands in the way."""
    program = state.program
    s = program.statement(stmt)
    what = f"bind({loop.name}, {axis.value!r})"
    path = state.path(loop.id)
    outer = path[:-1]
    _check(state, s, loop, outer, axis, what)
    exprs = [n.expr(s.name) for n in outer]
    o_names = _spatial(program, s, outer, what)
    lo, extent = _range(program, s, loop, what)
    buf = program.buffer(s.buffer)
    red = fresh_name(program, f"{buf.name}_red", ("", "_init", "_out"))
    r = unique_name(loop.name, o_names)
    r_val = regions.loop_value_expr(program, s.name, loop.expr(s.name))
    if lo:
        r_val = binop(BinOpKind.SUB, r_val, lo)
    # one slot row per iteration of the loops around: indexed by their values
    slots = tuple(regions.loop_value_expr(program, s.name, e) for e in exprs)
    temp = Buffer(red, tuple(loop_upper_bound(program, s.name, e) for e in exprs)
                  + (_const(extent),), buf.dtype, BufferRole.TEMP, MemScope.SHARED)
    own = [iterator_expr(s.name, s.iters, x) for x in o_names]
    init = Statement(f"{red}_init", tuple(o_names + [r]),
                     image_domain(program, s.name, own, f"{red}_init", o_names,
                                  [(r, 0, extent)]),
                     red, slots + (Var(r),), reduce_identity(s.reduction, buf.dtype),
                     block=f"{red}_init")
    update = Statement(s.name, s.iters, s.domain, red, slots + (r_val,), s.value, s.reduction,
                       s.block, s.is_init)
    steps = _halving_steps(program, s, own, o_names, slots, r, red, extent)
    # the new statements run over the target's own iterators (``_spatial``): its indices
    # carry over
    final = Statement(f"{red}_out", tuple(o_names),
                      image_domain(program, s.name, own, f"{red}_out", o_names),
                      buf.name, s.indices,
                      Load(red, slots + (_const(0),), buf.dtype), s.reduction,
                      block=f"{red}_out")
    stmts = []
    for x in program.statements:
        if x.name == s.name:
            stmts += [init, update, *steps, final]
        else:
            stmts.append(x)
    new_program = program.replace(statements=tuple(stmts), buffers=program.buffers + (temp,),
                                  nesting=())
    root, nid = _tree(program, s, state.root, loop, outer, o_names, r, axis, init, steps, final,
                      state.next_id)
    return rebase(state.with_root(root, nid), new_program, root)


def _halving_steps(program: Program, s: Statement, exprs: list[str], o_names: list[str],
                   slots: tuple[Expr, ...], r: str, red: str, extent: int) -> list[Statement]:
    """``red[..., t] = red[..., t] op red[..., t + h]`` for ``t < h`` (and ``t + h`` a slot),
    for h = P/2, ..., 1 where P is the power of two at or above ``extent``."""
    dtype = program.buffer(s.buffer).dtype
    combine = _COMBINE[s.reduction]  # type: ignore[index]
    steps = []
    h = (1 << (extent - 1).bit_length()) // 2
    while h >= 1:
        name = f"{red}_{h}"
        dom = image_domain(program, s.name, exprs, name, o_names, [(r, 0, min(h, extent - h))])
        value = binop(combine, Load(red, slots + (Var(r),), dtype),
                      Load(red, slots + (binop(BinOpKind.ADD, Var(r), _const(h)),), dtype))
        steps.append(Statement(name, tuple(o_names + [r]), dom, red, slots + (Var(r),),
                               value, block=name))
        h //= 2
    return steps


def _check(state: State, s: Statement, loop: LoopNode, outer: list[LoopNode],
           axis: ThreadAxis, what: str) -> None:
    if s.reduction is None or s.reduction not in _COMBINE:
        raise ScheduleError(f"{what}: '{s.name}' is no sum, product, max or min reduction")
    item = next((n for n in outer if n.thread is axis), None)
    if item is not None:
        raise ScheduleError(f"{what}: the reduction loop is inside loop '{item.name}', bound "
                            f"to {axis.value} already; bind the reduction loop to another "
                            "work-item axis (threadIdx.x under a threadIdx.y row loop)")
    rows = [n for n in outer if n.thread is not None and n.thread.is_item]
    if rows and any(len(n.children) != 1 for n in outer[outer.index(rows[0]):]):
        raise ScheduleError(f"{what}: work-item loop '{rows[0].name}' around the reduction "
                            "loop holds other statements too; a tree reduction under a "
                            "work-item row loop needs the reduction alone in it")
    others = [x for x in statements_under(loop) if x != s.name and (
        state.program.statement(x).buffer == s.buffer
        or any(ld.buffer == s.buffer for ld in state.program.statement(x).reads()))]
    if others:
        raise ScheduleError(f"{what}: {', '.join(others)} also use '{s.buffer}' inside loop "
                            f"'{loop.name}'; they would see partial results")


def _spatial(program: Program, s: Statement, outer: list[LoopNode], what: str) -> list[str]:
    """The iterators of the reduction's target element (those of its indices), which the
    loops around the reduction loop must determine: one slot row of the tree per element."""
    exprs = [n.expr(s.name) for n in outer]
    used = set().union(*(free_vars(e) for e in s.indices)) if s.indices else set()
    names = [it for it in s.iters if it in used]
    for it in names:
        if not affine.determined_by(program, s.name, exprs, iterator_expr(s.name, s.iters, it)
                                    ) if exprs else True:
            raise ScheduleError(f"{what}: the loops around the reduction loop do not fix "
                                f"iterator '{it}' of '{s.name}' (one element of "
                                f"'{s.buffer}' per iteration of them); move the loops of "
                                "the target's indices outside the reduction loop")
    for n in outer:
        if not affine.depends_only_on(program, s.name, n.expr(s.name), names):
            raise ScheduleError(f"{what}: loop '{n.name}' around the reduction loop runs over "
                                f"the reduction's own iterators; reorder it inside the bound "
                                "loop (only loops over the target's indices may be outside)")
    return names


def _range(program: Program, s: Statement, loop: LoopNode, what: str) -> tuple[int, int]:
    """The first value of the reduction loop and its (constant) number of values."""
    lo, hi = affine.value_range(program, s.name, loop.expr(s.name))
    if lo is None or hi is None:
        raise ScheduleError(f"{what}: the cross-thread reduction over loop '{loop.name}' needs "
                            "a constant extent; split the loop by a constant and bind the inner "
                            "loop")
    return lo, hi - lo + 1


def _const(v: int) -> Expr:
    return const(v)


def _tree(program: Program, s: Statement, root: Root, loop: LoopNode, outer: list[LoopNode],
          o_names: list[str], r: str, axis: ThreadAxis, init: Statement,
          steps: list[Statement], final: Statement, nid: int) -> tuple[Root, int]:
    """The loop tree: the initialization in a work-item loop before ``loop`` (now bound),
    the halving steps in work-item loops after it, the final combination after them.

    Work-item loops around ``loop`` (a threadIdx.y row loop over a threadIdx.x reduction)
    are repeated around each phase: every work-item runs every phase, and the phases are
    then children of a work-group loop, where the dependences place barriers."""
    names = o_names + [r]
    first = next((k for k, n in enumerate(outer) if n.thread is not None and n.thread.is_item),
                 len(outer))
    rows = outer[first:]

    def moved(st: Statement, expr: str) -> str:     # the loop's value for a new statement
        arg = instance_map(st.name, st.iters, s.name, s.iters)
        return affine.retarget(program, expr, s.name, st.name, arg)

    def item_nest(st: Statement, k: int) -> LoopNode:
        return LoopNode(k, r, ((st.name, iterator_expr(st.name, names, r)),),
                        (StmtNode(st.name),), LoopKind.THREAD, None, axis)

    def in_rows(st: Statement, body: Node, k: int) -> tuple[Node, int]:
        for n in reversed(rows):    # fresh copies of the row loops, for this phase only
            body = LoopNode(k, n.name, ((st.name, moved(st, n.expr(s.name))),), (body,),
                            n.kind, n.unroll_factor, n.thread, n.annotations)
            k += 1
        return body, k
    nests: list[Node] = []
    k = nid + 1 + len(steps)
    head, k = in_rows(init, item_nest(init, nid), k)
    bound: Node = replace(loop, kind=LoopKind.THREAD, thread=axis)
    phases = [(st, item_nest(st, nid + 1 + j)) for j, st in enumerate(steps)]
    tail = []
    for st, body in phases + [(final, StmtNode(final.name))]:
        node, k = in_rows(st, body, k)
        tail.append(node)
    if rows:
        top = rows[0]
        nests = [head, _with_inner(top, loop.id, bound), *tail]
        root = replace_node(root, top.id, tuple(nests))
    else:
        root = replace_node(root, loop.id, (head, bound, *tail))
    adds = {n.id: tuple((st.name, moved(st, n.expr(s.name))) for st in (init, *steps, final))
            for n in outer[:first]}
    return add_exprs(root, adds, params=program.params), k


def _with_inner(top: LoopNode, loop_id: int, bound: LoopNode) -> LoopNode:
    """``top`` with the loop ``loop_id`` below it replaced by ``bound``."""
    kids = tuple(bound if isinstance(c, LoopNode) and c.id == loop_id else
                 _with_inner(c, loop_id, bound) if isinstance(c, LoopNode) else c
                 for c in top.children)
    return top.with_children(kids)


__all__ = ["bind_reduction"]
