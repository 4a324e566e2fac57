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

from ..ir.expr import BinOpKind, Expr, Load, ReduceKind, Var, binop, const, reduce_identity
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.thread_axis import ThreadAxis
from ..ir.loops import LoopKind
from ..poly import affine, regions
from ..poly.launch import loop_upper_bound
from ..poly.isl_text import iterator_expr
from ..poly.recompute import image_domain
from ..poly.tree import LoopNode, Node, Root, StmtNode, statements_under
from ..poly.tree_edits import add_exprs, replace_node
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
    _check(state, s, loop, outer, what)
    o_names = [_plain(program, s, n, what) for n in outer]
    lo, extent = _range(program, s, loop, what)
    buf = program.buffer(s.buffer)
    red = _fresh(program, f"{buf.name}_red")
    r = _fresh_iter(loop.name, o_names)
    r_val = regions.loop_value_expr(program, s.name, loop.expr(s.name))
    if lo:
        r_val = binop(BinOpKind.SUB, r_val, lo)
    outer_vals = tuple(Var(x) for x in o_names)
    exprs = [n.expr(s.name) for n in outer]
    temp = Buffer(red, tuple(loop_upper_bound(program, s.name, e) for e in exprs)
                  + (_const(extent),), buf.dtype, BufferRole.TEMP, MemScope.SHARED)
    init = Statement(f"{red}_init", tuple(o_names + [r]),
                     image_domain(program, s.name, exprs, f"{red}_init", o_names,
                                  [(r, 0, extent)]),
                     red, outer_vals + (Var(r),), reduce_identity(s.reduction, buf.dtype),
                     block=f"{red}_init")
    update = Statement(s.name, s.iters, s.domain, red,
                       tuple(regions.loop_value_expr(program, s.name, e) for e in exprs)
                       + (r_val,), s.value, s.reduction, s.block, s.is_init)
    steps = _halving_steps(program, s, exprs, o_names, r, red, extent)
    # the target's indices are the outer loops' iterators (``_plain``): they carry over
    final = Statement(f"{red}_out", tuple(o_names),
                      image_domain(program, s.name, exprs, f"{red}_out", o_names),
                      buf.name, s.indices,
                      Load(red, outer_vals + (_const(0),), buf.dtype), s.reduction,
                      block=f"{red}_out")
    stmts = []
    for x in program.statements:
        if x.name == s.name:
            stmts += [init, update, *steps, final]
        else:
            stmts.append(x)
    new_program = program.replace(statements=tuple(stmts), buffers=program.buffers + (temp,),
                                  nesting=())
    root, nid = _tree(state.root, loop, outer, o_names, r, axis, init, steps, final,
                      state.next_id)
    return rebase(state.with_root(root, nid), new_program, root)


def _halving_steps(program: Program, s: Statement, exprs: list[str], o_names: list[str],
                   r: str, red: str, extent: int) -> list[Statement]:
    """``red[..., t] = red[..., t] op red[..., t + h]`` for ``t < h`` (and ``t + h`` a slot),
    for h = P/2, ..., 1 where P is the power of two at or above ``extent``."""
    dtype = program.buffer(s.buffer).dtype
    combine = _COMBINE[s.reduction]  # type: ignore[index]
    outer_vals = tuple(Var(x) for x in o_names)
    steps = []
    h = (1 << (extent - 1).bit_length()) // 2
    while h >= 1:
        name = f"{red}_{h}"
        dom = image_domain(program, s.name, exprs, name, o_names, [(r, 0, min(h, extent - h))])
        value = binop(combine, Load(red, outer_vals + (Var(r),), dtype),
                      Load(red, outer_vals + (binop(BinOpKind.ADD, Var(r), _const(h)),), dtype))
        steps.append(Statement(name, tuple(o_names + [r]), dom, red, outer_vals + (Var(r),),
                               value, block=name))
        h //= 2
    return steps


def _check(state: State, s: Statement, loop: LoopNode, outer: list[LoopNode], what: str) -> None:
    if s.reduction is None or s.reduction not in _COMBINE:
        raise ScheduleError(f"{what}: '{s.name}' is no sum, product, max or min reduction")
    item = next((n for n in outer if n.thread is not None and n.thread.is_item), None)
    if item is not None:
        raise ScheduleError(f"{what}: the reduction loop is inside work-item loop "
                            f"'{item.name}'; a cross-thread reduction needs its work-items on "
                            "one axis: bind the reduction loop alone, the loops around it to "
                            "work-groups")
    others = [x for x in statements_under(loop) if x != s.name and (
        state.program.statement(x).buffer == s.buffer
        or any(ld.buffer == s.buffer for ld in state.program.statement(x).reads()))]
    if others:
        raise ScheduleError(f"{what}: {', '.join(others)} also use '{s.buffer}' inside loop "
                            f"'{loop.name}'; they would see partial results")


def _plain(program: Program, s: Statement, n: LoopNode, what: str) -> str:
    v = regions.loop_value_expr(program, s.name, n.expr(s.name))
    if not (isinstance(v, Var) and v.name in s.iters):
        raise ScheduleError(f"{what}: loop '{n.name}' around the reduction is {v}, not one of "
                            f"the iterators of '{s.name}'; a cross-thread reduction needs the "
                            "loops around it unsplit (split the reduction loop only)")
    return v.name


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


def _fresh(program: Program, base: str) -> str:
    taken = {b.name for b in program.buffers} | {s.name for s in program.statements}
    name, k = base, 1
    while any(x in taken for x in (name, f"{name}_init", f"{name}_out")):
        name, k = f"{base}_{k}", k + 1
    return name


def _fresh_iter(base: str, taken: list[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _tree(root: Root, loop: LoopNode, outer: list[LoopNode], o_names: list[str], r: str,
          axis: ThreadAxis, init: Statement, steps: list[Statement], final: Statement,
          nid: int) -> tuple[Root, int]:
    """The loop tree: the initialization in a work-item loop before ``loop`` (now bound),
    the halving steps in work-item loops after it, the final combination after them."""
    names = o_names + [r]

    def item_nest(st: Statement, k: int) -> LoopNode:
        return LoopNode(k, r, ((st.name, iterator_expr(st.name, names, r)),),
                        (StmtNode(st.name),), LoopKind.THREAD, None, axis)
    nests: list[Node] = [item_nest(init, nid), replace(loop, kind=LoopKind.THREAD, thread=axis)]
    for k, st in enumerate(steps):
        nests.append(item_nest(st, nid + 1 + k))
    nests.append(StmtNode(final.name))
    root = replace_node(root, loop.id, tuple(nests))
    adds = {n.id: tuple((st.name, iterator_expr(st.name, names, o_names[k]))
                        for st in (init, *steps))
            + ((final.name, iterator_expr(final.name, o_names, o_names[k])),)
            for k, n in enumerate(outer)}
    return add_exprs(root, adds), nid + 1 + len(steps)


__all__ = ["bind_reduction"]
