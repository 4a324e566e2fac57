# SPDX-License-Identifier: Apache-2.0
"""What a software prefetch brings in: the elements of a buffer that a block's accesses under a
loop touch some iterations ahead (``Schedule.prefetch``), as exact isl sets, and the small loop
nest that names them.

For a loop ``L`` with the loops ``q0, ..., qk = L`` around it (outermost first), the footprint
ahead is the relation ``[q0, ..., qk] -> buffer[x]`` of the elements that the block's statement
instances at ``(q0, ..., qk + d * stride)`` access: only instances of the iteration domain
count, so at the last ``d`` iterations of ``L`` the region is empty and nothing is prefetched.

Along an enclosing loop ``A = qa`` (``Along``): the block need not be under ``L``; its
instances that count are those at ``qa + d * stride`` with the same values of the loops
``q0, ..., q(a-1)`` and, below ``A``, loop by loop *by position* the same values as the loops
between ``A`` and ``L`` (inclusive of ``L``), its deeper loops taking every value. Loops that
hold one value once the loops around them are fixed (a ``compute_at``'s loop over one row,
``L``'s or the block's) take no part in the correspondence: they follow the loops around them.
E.g. in an exp loop ``j0`` of row ``i``, ``along=i``: the block's loop ``k0`` of the next row
at ``k0 = j0``, and everything under ``k0``.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Sequence

import islpy as isl

from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, Var, binop
from ..ir.loops import Block, For, If, Node, Prefetch
from ..ir.program import Program
from ..ir.simplify import simplify
from .access import accesses, buffer_box, domain
from .isl_ast import ast_expr
from .isl_schedule import context
from .isl_util import map_, map_in, params_prefix
from .tree import LoopNode, StmtNode

LINE_BYTES = 64
_PARAM = "_pf_loop"


def _values(program: Program, path: Sequence[object], stmt: str) -> isl.Map:
    """``S[i] -> [q0, ..., qk]``: the values of the loops of ``path`` at each instance of S."""
    m = None
    for node in path:
        piece = map_in(program.params, node.expr(stmt))  # type: ignore[attr-defined]
        m = piece if m is None else m.flat_range_product(piece)
    assert m is not None
    return m.intersect_domain(domain(program, program.statement(stmt)))


def _relations(program: Program, path: Sequence[object], stmts: Sequence[str], buffer: str
               ) -> tuple[isl.Map | None, isl.Set | None]:
    """The footprint relation ``[q] -> buffer[x]`` per iteration and the set of iterations."""
    rel, iterations = None, None
    for s in stmts:
        vals = _values(program, path, s)
        iterations = vals.range() if iterations is None else iterations.union(vals.range())
        for a in accesses(program):
            if a.statement == s and a.buffer == buffer:
                f = vals.reverse().apply_range(a.relation)
                rel = f if rel is None else rel.union(f)
    return rel, iterations


@dataclass(frozen=True)
class Along:
    """A prefetch along an enclosing loop: ``index`` of that loop in the hinted loop's path,
    the block's statements under it with their loop paths (outermost first, from the root),
    and the statements under the hinted loop (its iterations are theirs)."""
    index: int
    block_paths: dict[str, tuple[LoopNode, ...]]
    here: tuple[str, ...]


def statement_paths(along_path: Sequence[LoopNode], stmts: Sequence[str]
                    ) -> dict[str, tuple[LoopNode, ...]]:
    """The loop path of each statement of ``stmts`` under the last loop of ``along_path``."""
    out: dict[str, tuple[LoopNode, ...]] = {}

    def go(n: object, acc: tuple[LoopNode, ...]) -> None:
        if isinstance(n, StmtNode):
            if n.statement in stmts:
                out[n.statement] = acc
            return
        assert isinstance(n, LoopNode)
        for c in n.children:
            go(c, acc + (c,) if isinstance(c, LoopNode) else acc)
    go(along_path[-1], tuple(along_path))
    return out


def _moving(values: isl.Set, start: int) -> list[int]:
    """The dimensions from ``start`` on of a set of loop values that take more than one value
    once the dimensions before them are fixed."""
    n = values.dim(isl.dim_type.set)
    out = []
    for t in range(start, n):
        upto = values.project_out(isl.dim_type.set, t + 1, n - t - 1)
        m = isl.Map.from_range(upto).move_dims(isl.dim_type.in_, 0, isl.dim_type.out, 0, t)
        if not m.is_single_valued():
            out.append(t)
    return out


def _shift(program: Program, k: int, m: int, fixed: Sequence[tuple[int, int]], moved: int,
           by: int) -> isl.Map:
    """``[q0..qk] -> [w0..wm]`` with ``w_moved = q_moved + by`` and ``w_b = q_a`` for each
    ``(a, b)`` of ``fixed``; the other ``w`` are free."""
    qs = ", ".join(f"q{j}" for j in range(k + 1))
    ws = ", ".join(f"w{j}" for j in range(m + 1))
    eqs = [f"w{moved} = q{moved} + {by}"] + [f"w{b} = q{a}" for a, b in fixed]
    return map_(f"{params_prefix(program.params)}{{ [{qs}] -> [{ws}] : "
                f"{' and '.join(eqs)} }}")


def _ahead_along(program: Program, path: Sequence[object], buffer: str, distance: int,
                 along: Along) -> tuple[isl.Map, isl.Set] | None:
    iterations = None
    for s in along.here:
        r = _values(program, path, s).range()
        iterations = r if iterations is None else iterations.union(r)
    if iterations is None:
        return None
    iterations = iterations.coalesce()
    a, k = along.index, len(path) - 1
    mine = _moving(iterations, a + 1)
    stride = iterations.get_stride(a)
    step = stride.to_python() if stride.is_int() and stride.to_python() > 0 else 1
    box = buffer_box(program, buffer)
    rel = None
    using = {acc.statement for acc in accesses(program) if acc.buffer == buffer}
    for s, spath in along.block_paths.items():
        if s not in using:
            continue
        vals = _values(program, spath, s)
        theirs = _moving(vals.range().coalesce(), a + 1)
        if len(theirs) < len(mine):
            return None     # along_fits says why
        fixed = [(j, j) for j in range(a)] + list(zip(mine, theirs))
        shift = _shift(program, k, len(spath) - 1, fixed, a, distance * step)
        for acc in accesses(program):
            if acc.statement == s and acc.buffer == buffer:
                f = shift.apply_range(vals.reverse().apply_range(acc.relation))
                rel = f if rel is None else rel.union(f)
    if rel is None:
        return None
    rel = rel.intersect_range(box).intersect_domain(iterations).coalesce()
    return rel, iterations


def along_fits(program: Program, path: Sequence[object], along: Along, buffer: str) -> str:
    """Why the loops below the enclosing loop of the block's statements that access
    ``buffer`` cannot follow the hinted loop's, or ''."""
    iterations = None
    for s in along.here:
        r = _values(program, path, s).range()
        iterations = r if iterations is None else iterations.union(r)
    if iterations is None:
        return "nothing runs under the loop"
    mine = _moving(iterations.coalesce(), along.index + 1)
    using = {a.statement for a in accesses(program) if a.buffer == buffer}
    for s, spath in along.block_paths.items():
        if s not in using:
            continue
        theirs = _moving(_values(program, spath, s).range().coalesce(), along.index + 1)
        if len(theirs) < len(mine):
            names = [str(getattr(path[j], "name", j)) for j in mine]
            return (f"statement {s} has {len(theirs)} loop(s) of more than one value under the "
                    f"enclosing loop, fewer than the {len(mine)} it should follow "
                    f"({', '.join(names)})")
    return ""


def _ahead(program: Program, path: Sequence[object], stmts: Sequence[str], buffer: str,
           distance: int, along: Along | None = None) -> tuple[isl.Map, isl.Set] | None:
    """The footprint ``distance`` iterations ahead, on the current iterations: (relation
    ``[q] -> buffer[x]``, set of current iterations ``[q]``); None if nothing is accessed."""
    if along is not None:
        return _ahead_along(program, path, buffer, distance, along)
    rel, iterations = _relations(program, path, stmts, buffer)
    if rel is None or iterations is None:
        return None
    # a load under ``where`` may name elements outside the buffer where it is not evaluated
    # (the padding of a convolution): never prefetch those
    rel = rel.intersect_range(buffer_box(program, buffer))
    rel, iterations = rel.coalesce(), iterations.coalesce()
    k = len(path) - 1
    stride = iterations.get_stride(k)
    step = stride.to_python() if stride.is_int() and stride.to_python() > 0 else 1
    qs = [f"q{j}" for j in range(k + 1)]
    moved = qs[:-1] + [f"{qs[-1]} + {distance * step}"]
    shift = map_(f"{params_prefix(program.params)}{{ [{', '.join(qs)}] -> "
                 f"[{', '.join(moved)}] }}")
    return shift.apply_range(rel).intersect_domain(iterations), iterations


def lines_per_iteration(program: Program, path: Sequence[object], stmts: Sequence[str],
                        buffer: str, distance: int, along: Along | None = None) -> int | None:
    """An upper bound on the cache lines of ``buffer`` that one iteration of the last loop of
    ``path`` touches ``distance`` iterations ahead, for any sizes; None when it is unbounded
    (it grows with a size parameter). Rows of the last dimension may start anywhere in a line."""
    got = _ahead(program, path, stmts, buffer, distance, along)
    if got is None:
        return 0
    ahead = got[0]
    if ahead.is_empty():
        return 0
    n = ahead.dim(isl.dim_type.out)
    if n == 0:
        return 1
    pairs = ahead.range_product(ahead).range().flatten()
    space = isl.LocalSpace.from_space(pairs.get_space())
    widths = []
    for d in range(n):
        diff = isl.Aff.var_on_domain(space, isl.dim_type.set, d).sub(
            isl.Aff.var_on_domain(space, isl.dim_type.set, n + d))
        top = pairs.max_val(diff)
        if not top.is_int():
            return None
        widths.append(top.to_python() + 1)
    size = program.buffer(buffer).dtype.itemsize
    row_bytes = widths[-1] * size
    per_row = -(-(LINE_BYTES - size + row_bytes) // LINE_BYTES)
    return prod(widths[:-1]) * per_row


def prefetch_nest(program: Program, path: Sequence[object], stmts: Sequence[str], buffer: str,
                  distance: int, loop_values: dict[int, Expr], taken: set[str], *,
                  write: bool, locality: int, along: Along | None = None) -> Node | None:
    """The loop nest of ``Prefetch`` nodes for the footprint ahead, as code placed at the top of
    the last loop of ``path``. ``loop_values`` gives the value of each loop of ``path`` in the
    generated code (by loop id); loops missing from it (isl wrote no loop: one value) are
    projected out. Row loops get fresh names not in ``taken``. None when the region is empty
    at every iteration. ``along``: the footprint along an enclosing loop (module docstring)."""
    got = _ahead(program, path, stmts, buffer, distance, along)
    if got is None:
        return None
    ahead, iterations = got
    known = [j for j, node in enumerate(path) if node.id in loop_values]  # type: ignore[attr-defined]
    for j in reversed(range(len(path))):
        if j not in known:
            ahead = ahead.project_out(isl.dim_type.in_, j, 1)
            iterations = iterations.project_out(isl.dim_type.set, j, 1)
    names = {}
    for pos, j in enumerate(known):
        pname = f"{_PARAM}{path[j].id}"  # type: ignore[attr-defined]
        names[pname] = loop_values[path[j].id]  # type: ignore[attr-defined]
        ahead = ahead.set_dim_name(isl.dim_type.in_, pos, pname)
        iterations = iterations.set_dim_name(isl.dim_type.set, pos, pname)
    nparams = ahead.dim(isl.dim_type.param)
    region = ahead.move_dims(isl.dim_type.param, nparams, isl.dim_type.in_, 0, len(known)).range()
    current = iterations.move_dims(isl.dim_type.param, nparams, isl.dim_type.set, 0,
                                   len(known)).params()
    ctx = current.intersect(context(program).align_params(current.get_space()))
    region = region.intersect_params(ctx).coalesce()
    if region.is_empty():
        return None
    return _Nest(region, ctx, names, taken, buffer, write, locality).build()


class _Nest:
    """isl's AST that scans the region; the loop over the buffer's last dimension (contiguous
    elements) becomes one ``Prefetch`` of the row: from the loop's first value, as many
    elements as its range spans (isl writes the bounds: ``min(n - 1, 16 * j0 + 47)``)."""

    def __init__(self, region: isl.Set, ctx: isl.Set, names: dict[str, Expr],
                 taken: set[str], buffer: str, write: bool, locality: int):
        self.region, self.ctx, self.names, self.taken = region, ctx, names, set(taken)
        self.buffer, self.write, self.locality = buffer, write, locality
        self.last = f"c{region.dim(isl.dim_type.set)}"   # isl's iterator of the last dim

    def build(self) -> Node:
        """isl's AST of ``region[x] -> [0, x]``. The constant first dimension and
        ``exploit_nested_bounds`` off make isl guard every row by the exact condition that it
        is not empty (by default it leaves that to the innermost loop, which would run no
        iteration; a ``Prefetch`` of the row needs the guard)."""
        n = self.region.dim(isl.dim_type.set)
        xs = ", ".join(f"x{k}" for k in range(n))
        schedule = map_(f"{{ {self.buffer}[{xs}] -> [0{', ' if n else ''}{xs}] }}")
        schedule = schedule.align_params(self.region.get_space()).intersect_domain(self.region)
        ctx = self.ctx.get_ctx()
        saved = ctx.get_ast_build_exploit_nested_bounds()
        ctx.set_ast_build_exploit_nested_bounds(0)
        try:
            ast = isl.AstBuild.from_context(self.ctx).node_from_schedule_map(
                isl.UnionMap.from_map(schedule))
        finally:
            ctx.set_ast_build_exploit_nested_bounds(saved)
        return self.node(ast, dict(self.names))

    def fresh(self) -> str:
        k = 0
        while f"pf_r{k}" in self.taken:
            k += 1
        self.taken.add(f"pf_r{k}")
        return f"pf_r{k}"

    def expr(self, e: isl.AstExpr, names: dict[str, Expr]) -> Expr:
        return simplify(ast_expr(e, names))

    def node(self, n: isl.AstNode, names: dict[str, Expr]) -> Node:
        t = n.get_type()
        if t == isl.ast_node_type.for_:
            return self.for_(n, names)
        if t == isl.ast_node_type.if_:
            other = self.node(n.if_get_else_node(), names) if n.if_has_else_node() else None
            return If(self.expr(n.if_get_cond(), names), self.node(n.if_get_then_node(), names),
                      other)
        if t == isl.ast_node_type.block:
            kids = n.block_get_children()
            return Block(tuple(self.node(kids.get_at(k), names)
                               for k in range(kids.n_ast_node())))
        assert t == isl.ast_node_type.user, t
        return self.prefetch(n, names, Const(1, INDEX, True))

    def prefetch(self, user: isl.AstNode, names: dict[str, Expr], count: Expr) -> Prefetch:
        e = user.user_get_expr()
        at = tuple(self.expr(e.op_get_arg(k + 1), names) for k in range(e.op_get_n_arg() - 1))
        return Prefetch(self.buffer, at, count, self.write, self.locality)

    def for_(self, n: isl.AstNode, names: dict[str, Expr]) -> Node:
        it = n.for_get_iterator().get_id().get_name()
        start = self.expr(n.for_get_init(), names)
        cond = n.for_get_cond()
        stop = ast_expr(cond.op_get_arg(1), names)
        if cond.op_get_type() == isl.ast_expr_op_type.le:
            stop = binop(BinOpKind.ADD, stop, 1)
        body = n.for_get_body()
        if it == self.last and body.get_type() == isl.ast_node_type.user:
            # the row: its first element and how many follow (a strided row spans its gaps);
            # isl's guards around it (see ``build``) make it non-empty
            count = simplify(binop(BinOpKind.SUB, stop, start))
            return self.prefetch(body, names | {it: start}, count)
        var = self.fresh()
        return For(var, start, simplify(stop), self.node(body, names | {it: Var(var)}),
                   step=n.for_get_inc().int_get_val().to_python())


__all__ = ["LINE_BYTES", "Along", "along_fits", "lines_per_iteration", "prefetch_nest",
           "statement_paths"]
