# SPDX-License-Identifier: Apache-2.0
"""isl's AST -> polyloop's loop AST (``ir.loops``).

Each mark ``L<id>`` names the loop node of the band below it: the ``for`` isl wrote gets that
loop's name, kind, unroll factor, GPU axis and annotations. A fused loop whose AST was built
from its parts becomes one loop over their product (each part's loop a guard); where isl left
a part without a loop the conversion gives up (``CannotCollapse``) and the caller builds the
fused loop as isl writes it; a fused loop of one iteration gets no loop at all, as isl writes
none for a loop of one value. A statement instance becomes a ``Store`` with its iterators
replaced by isl's expressions and its affine indices written by isl (``AccessIndices``).
"""
from __future__ import annotations

import islpy as isl

from ..errors import PolyloopError
from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, Load, Var, binop, rewrite_topdown, substitute
from ..ir.loops import Block, For, If, Node, Store
from ..ir.program import Program
from ..ir.simplify import simplify
from .access_indices import AccessIndices
from .isl_ast import ast_expr, statements_in
from .isl_schedule import collapsed
from .symbolic_fuse import collapse_nest
from .tree import LoopNode


class CannotCollapse(Exception):
    """isl left a part of a collapsed loop without a loop of its own (a single value)."""

    def __init__(self, loop_id: int):
        super().__init__(loop_id)
        self.loop_id = loop_id


class Converter:
    """Converts one isl AST (see the module docstring)."""

    def __init__(self, program: Program, info: dict[int, LoopNode], indices: AccessIndices,
                 depths: dict[int, int], plain: frozenset[int]):
        self.program = program
        self.info = info
        self.indices = indices
        self.depths = depths
        self.plain = plain
        self.taken = set(program.params) | {b.name for b in program.buffers}
        # write isl's ``n >= x + 1`` as ``x < n`` (the guards of a GPU kernel's partial tiles)
        self.strict_bounds = False
        # statement -> hardware parameter -> the variable its own loop declares
        self.statement_names: dict[str, dict[str, str]] = {}
        # isl iterators of collapsed parts not yet bound by their loop: -> (fused loop, range)
        self.unbound: dict[str, tuple[int, int, int]] = {}

    def node(self, n: isl.AstNode, names: dict[str, Expr], marks: tuple[LoopNode, ...]
             ) -> Node:
        """``marks``: the loops whose marks are above ``n`` and whose ``for`` is not yet
        built (several where ``poly.chains`` made their bands one)."""
        t = n.get_type()
        if t == isl.ast_node_type.mark:
            loop = self.info[int(n.mark_get_id().get_name()[1:])]
            if collapsed(loop, self.plain):
                return self.collapse(n.mark_get_node(), names, loop)
            built = self.node(n.mark_get_node(), names, marks + (loop,))
            if loop.fused is not None:   # loops of symbolic extents fused in the code
                return collapse_nest(built, len(loop.fused.inners), loop.fused.factor,
                                     loop.fused.names)
            return built
        if t == isl.ast_node_type.for_:
            return self.for_(n, self.local_names(n, names), marks)
        if t == isl.ast_node_type.if_:
            names = self.local_names(n, names)
            cond = simplify(self.expr(n.if_get_cond(), names))
            then = self.node(n.if_get_then_node(), names, marks)
            other = self.node(n.if_get_else_node(), names, marks) if n.if_has_else_node() else None
            return If(cond, then, other)
        if t == isl.ast_node_type.block:
            kids = n.block_get_children()
            return Block(tuple(self.node(kids.get_at(k), names, marks)
                               for k in range(kids.n_ast_node())))
        if t == isl.ast_node_type.user:
            return self.user(n, names)
        raise PolyloopError(f"unexpected isl AST node {t}")

    def local_names(self, n: isl.AstNode, names: dict[str, Expr]) -> dict[str, Expr]:
        """``names`` with the hardware parameters spelled as the loops of the statements
        under ``n`` spell them, when those agree (``b_dim_0`` rather than ``i_inner``, both
        ``get_local_id(1)``, in the guard of a copy into local memory)."""
        if not self.statement_names:
            return names
        spellings = {tuple(sorted(self.statement_names.get(s, {}).items()))
                     for s in statements_in(n)}
        if len(spellings) != 1:
            return names
        return {**names, **{p: Var(v) for p, v in next(iter(spellings))}}

    def fresh(self, base: str, names: dict[str, Expr]) -> str:
        used = self.taken | {v.name for v in names.values() if isinstance(v, Var)}
        name, k = base, 1
        while name in used:
            name, k = f"{base}_{k}", k + 1
        return name

    def collapse(self, n: isl.AstNode, names: dict[str, Expr], loop: LoopNode) -> Node:
        """One loop over the product of the parts' ranges; each part's value is recovered with
        // and %, and each part's own loop (as isl wrote it) becomes a guard."""
        ranges = loop.collapse.ranges  # type: ignore[union-attr]
        var = self.fresh(loop.name, names)
        fused: Expr = Var(var)
        total = 1
        for _, ext in ranges:
            total *= ext
        inner = dict(names)
        stride = total
        added = {}
        for k, (lo, ext) in enumerate(ranges):
            stride //= ext
            v = binop(BinOpKind.FLOORDIV, fused, stride) if stride > 1 else fused
            if k > 0:
                v = binop(BinOpKind.MOD, v, ext)
            it = f"c{self.depths[loop.id] + k}"
            inner[it] = simplify(binop(BinOpKind.ADD, v, lo) if lo else v)
            if ext > 1:     # a part of one value gets no loop from isl, and needs none
                added[it] = (loop.id, lo, ext)
        if total == 1:
            return self.node(n, self.single(inner, ranges, loop), ())
        saved = dict(self.unbound)
        self.unbound.update(added)
        body = self.node(n, inner, ())
        self.unbound = saved
        return For(var, Const(0, INDEX, weak=True), Const(total, INDEX, weak=True), body,
                   kind=loop.kind, unroll_factor=loop.unroll_factor, thread=loop.thread,
                   annotations=loop.annotations)

    def single(self, inner: dict[str, Expr], ranges: tuple, loop: LoopNode) -> dict[str, Expr]:
        """The names of a collapsed loop of one iteration, which gets no ``for``, as isl
        writes none for a loop of one value: each part is its one value. isl may emit the
        children of such a loop's body (or of a loop of one value around it) in a copy each
        of the loops above; a ``for`` of one iteration in each copy would read as copies over
        disjoint iterations, and a local tile declared in each would not reach from its
        initialization to its copy-out (``codegen.temps``)."""
        out = dict(inner)
        for k, (lo, _) in enumerate(ranges):
            out[f"c{self.depths[loop.id] + k}"] = Const(lo, INDEX, weak=True)
        return out

    def guard(self, n: isl.AstNode, names: dict[str, Expr]) -> Node:
        """The loop isl wrote for a collapsed part, as a condition on the part's value."""
        it = n.for_get_iterator().get_id().get_name()
        _, lo, ext = self.unbound.pop(it)
        value = names[it]
        start = simplify(self.expr(n.for_get_init(), names))
        cond = n.for_get_cond()
        stop = simplify(self.expr(cond.op_get_arg(1), names))
        le = cond.op_get_type() == isl.ast_expr_op_type.le
        step = n.for_get_inc().int_get_val().to_python()
        body = self.node(n.for_get_body(), names, ())
        self.unbound[it] = (_, lo, ext)
        conds: list[Expr] = []
        if not (isinstance(start, Const) and start.value <= lo):
            conds.append(binop(BinOpKind.GE, value, start))
        if not (isinstance(stop, Const) and stop.value >= lo + ext - (1 if le else 0)):
            conds.append(binop(BinOpKind.LE if le else BinOpKind.LT, value, stop))
        if step != 1:
            conds.append(binop(BinOpKind.EQ, binop(BinOpKind.MOD, binop(
                BinOpKind.SUB, value, start), step), 0))
        if not conds:
            return body
        test = conds[0]
        for c in conds[1:]:
            test = binop(BinOpKind.AND, test, c)
        return If(simplify(test), body, None)

    def for_(self, n: isl.AstNode, names: dict[str, Expr], marks: tuple[LoopNode, ...]
             ) -> Node:
        it = n.for_get_iterator().get_id().get_name()
        if it in self.unbound:
            return self.guard(n, names)
        depth = int(it[1:])     # isl names the iterator at depth d ``c<d>``
        mark = next((m for m in marks if self.depths[m.id] == depth), None)
        deeper = tuple(m for m in marks if self.depths[m.id] > depth)
        var = self.fresh(mark.name if mark is not None else it, names)
        start = simplify(self.expr(n.for_get_init(), names))
        inner = dict(names)
        inner[it] = Var(var)
        cond = n.for_get_cond()
        if cond.op_get_type() not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
            raise PolyloopError(f"unexpected loop condition {cond.to_C_str()}")
        bound = self.expr(cond.op_get_arg(1), names)
        stop = binop(BinOpKind.ADD, bound, 1) if cond.op_get_type() == isl.ast_expr_op_type.le else bound
        stop = simplify(stop)
        step = n.for_get_inc().int_get_val().to_python()
        body = self.node(n.for_get_body(), inner, deeper)
        if mark is None:
            return For(var, start, stop, body, step=step)
        return For(var, start, stop, body, kind=mark.kind, step=step,
                   unroll_factor=mark.unroll_factor, thread=mark.thread,
                   annotations=mark.annotations)

    def user(self, n: isl.AstNode, names: dict[str, Expr]) -> Node:
        if self.unbound:
            # a part without its own loop (isl found a single value): the collapsed loop would
            # run this statement once per value of that part
            raise CannotCollapse(next(iter(self.unbound.values()))[0])
        e = n.user_get_expr()
        name = e.op_get_arg(0).get_id().get_name()
        stmt = self.program.statement(name)
        if name in self.statement_names:
            names = {**names, **{p: Var(v) for p, v in self.statement_names[name].items()}}
        args = [self.expr(e.op_get_arg(k + 1), names) for k in range(e.op_get_n_arg() - 1)]
        sub = dict(zip(stmt.iters, args))
        found = self.indices.found[int(n.get_annotation().get_name()[1:])]
        exact = {k: tuple(simplify(self.expr(x, names)) for x in v) for k, v in found.items()}

        def instantiate(x: Expr) -> Expr | None:
            if isinstance(x, Load) and id(x) in exact:
                return Load(x.buffer, exact[id(x)], x.dtype)
            if isinstance(x, Var) and x.name in sub:
                return sub[x.name]
            return None
        value = rewrite_topdown(stmt.value, instantiate)
        target = exact.get(-1) or tuple(simplify(substitute(i, sub)) for i in stmt.indices)
        return Store(stmt.buffer, target, simplify(value), stmt.reduction, stmt.name)

    def expr(self, e: isl.AstExpr, names: dict[str, Expr]) -> Expr:
        return ast_expr(e, names, strict_bounds=self.strict_bounds)

