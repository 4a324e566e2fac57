# SPDX-License-Identifier: Apache-2.0
"""From a loop tree to isl's AST to polyloop's loop AST.

isl decides every loop bound and guard (tiles that do not divide, skewed bands, fused nests);
nothing here computes bounds by hand. Each loop node becomes a band under a mark ``L<id>``,
so the generated ``for`` loops can be matched back to the user's loops, their names and kinds.
"""
from __future__ import annotations

import islpy as isl

from ..errors import PolyloopError
from ..ir.dtypes import INDEX
from ..ir.expr import (BinOpKind, Const, Expr, Load, Select, Unary, UnaryKind, Var, VarKind,
                       binop, loads, rewrite_topdown, substitute)
from ..ir.loops import Block, For, If, Node, Store
from ..ir.simplify import simplify
from ..ir.program import Program
from .access import domain
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, set_
from .isolate import isolate_full_tiles
from .tree import LoopNode, Root, StmtNode, loops, statements_under


def _map(program: Program, text: str) -> isl.Map:
    if not text.lstrip().startswith("["):
        text = params_prefix(program.params) + text
    return map_(text)


def _collapsed(node: LoopNode, plain: frozenset[int]) -> bool:
    """Is the node a fused loop whose AST is built from its parts and collapsed afterwards?"""
    return (node.collapse is not None and node.id not in plain
            and node.collapse.applies(node.exprs))


def _width(node: LoopNode, plain: frozenset[int]) -> int:
    """How many band members (isl AST depths) the node occupies."""
    return len(node.collapse.ranges) if _collapsed(node, plain) else 1  # type: ignore[union-attr]


def _band(program: Program, node: LoopNode, plain: frozenset[int]) -> isl.MultiUnionPwAff:
    """The loop's values for the statements below it (its parts', for a collapsed loop)."""
    um = None
    for stmt, text in node.exprs:
        if _collapsed(node, plain):
            m = None
            for part in node.collapse.part_exprs(stmt):  # type: ignore[union-attr]
                pm = _map(program, part)
                m = pm if m is None else m.flat_range_product(pm)
        else:
            m = _map(program, text)
        um = isl.UnionMap.from_map(m) if um is None else um.union(isl.UnionMap.from_map(m))
    return isl.MultiUnionPwAff.from_union_map(um)


def _insert(program: Program, at: isl.ScheduleNode, kids: tuple, plain: frozenset[int],
            doms: dict[str, isl.Set]) -> isl.ScheduleNode:
    """Insert the subtree of ``kids`` at the leaf ``at``; returns the node now at its place.
    Several children become a sequence (one filter per child: the domains of its
    statements); a loop becomes a band under a mark ``L<id>``."""
    if not kids:
        return at
    if len(kids) == 1:
        return _insert_node(program, at, kids[0], plain, doms)
    filters = None
    for c in kids:
        f = None
        for stmt in statements_under(c):
            d = isl.UnionSet.from_set(doms[stmt])
            f = d if f is None else f.union(d)
        filters = (isl.UnionSetList.from_union_set(f) if filters is None  # type: ignore[arg-type]
                   else filters.add(f))
    node = at.insert_sequence(filters)
    for k, c in enumerate(kids):
        node = _insert_node(program, node.child(k).child(0), c, plain, doms).parent().parent()
    return node


def _insert_node(program: Program, at: isl.ScheduleNode, node: object, plain: frozenset[int],
                 doms: dict[str, isl.Set]) -> isl.ScheduleNode:
    if isinstance(node, StmtNode):
        return at
    assert isinstance(node, LoopNode)
    mark = at.insert_mark(isl.Id(f"L{node.id}"))
    band = mark.child(0).insert_partial_schedule(_band(program, node, plain))
    return _insert(program, band.child(0), node.children, plain, doms).parent().parent()


def isl_schedule(program: Program, root: Root, plain: frozenset[int] = frozenset()
                 ) -> isl.Schedule:
    """The isl schedule tree of ``root``; fused loops not in ``plain`` appear as their parts.
    Built node by node from the (cached) isl objects of the loop expressions, not through
    text: the maps are parsed once, for legality, and reused here."""
    doms = {s.name: domain(program, s) for s in program.statements}
    every = None
    for d in doms.values():
        u = isl.UnionSet.from_set(d)
        every = u if every is None else every.union(u)
    if every is None:
        raise PolyloopError(f"program '{program.name}' has no statements")
    top = isl.Schedule.from_domain(every).get_root().child(0)
    return _insert(program, top, root.children, plain, doms).get_schedule()


def context(program: Program) -> isl.Set:
    """What is known about the parameters: sizes are non-negative, plus the user's assumptions."""
    pre = params_prefix(program.params)
    cons = " and ".join(f"{p} >= 0" for p in program.params)
    ctx = set_(f"{pre}{{ : {cons} }}" if cons else "{ : }")
    if program.assumptions:
        ctx = ctx.intersect(set_(program.assumptions))
    return ctx


def build_ast(program: Program, root: Root, *, isolate: bool = False) -> Node:
    """The loop AST of ``program`` executed in the order of ``root``.

    A fused loop is built as the nested loops it replaced (isl writes clean bounds for those,
    not for their flattened product) and collapsed into one loop here; where the collapse
    cannot be done exactly (isl dropped a loop of one iteration), isl builds the fused loop
    itself. With ``isolate``, full tiles get their own nest (``poly.isolate``; code
    generation asks for it, printing does not)."""
    plain: frozenset[int] = frozenset()
    while True:
        try:
            return _build_ast(program, root, plain, isolate)
        except _CannotCollapse as e:
            plain = plain | {e.loop_id}


def _build_ast(program: Program, root: Root, plain: frozenset[int], isolate: bool) -> Node:
    ctx = context(program)
    sched = isl_schedule(program, root, plain)
    if isolate:  # full tiles get a constant-bound nest of their own (isl's isolate option)
        sched = isolate_full_tiles(program, root, sched, ctx)
    build = isl.AstBuild.from_context(ctx)
    indices = _AccessIndices(program)
    build, _ = build.set_at_each_domain(indices.at_domain)
    ast = build.node_from_schedule(sched)
    info = {n.id: n for n in loops(root)}
    conv = _Converter(program, info, indices, _depths(root, plain), plain)
    return conv.node(ast, {}, None)


def _depths(root: Root, plain: frozenset[int]) -> dict[int, int]:
    """The isl AST depth (``c<depth>``) of each loop's first band member."""
    out: dict[int, int] = {}

    def go(n: object, depth: int) -> None:
        if isinstance(n, LoopNode):
            out[n.id] = depth
            depth += _width(n, plain)
        if not isinstance(n, StmtNode):
            for c in n.children:  # type: ignore[attr-defined]
                go(c, depth)
    go(root, 0)
    return out


class _CannotCollapse(Exception):
    def __init__(self, loop_id: int):
        super().__init__(loop_id)
        self.loop_id = loop_id


class _AccessIndices:
    """Index expressions of affine accesses, written by isl in the context of each statement
    instance's loops, so that ``P[(64*j0 + j1) // 64]`` comes out as ``P[j0]``."""

    def __init__(self, program: Program):
        self.program = program
        self.found: list[dict[int, list[isl.AstExpr]]] = []
        self._affine: dict[str, list[tuple[Load, isl.PwMultiAff]]] = {}

    def _accesses(self, name: str) -> list[tuple[Load, isl.PwMultiAff]]:
        if name not in self._affine:
            stmt = self.program.statement(name)
            head = f"{params_prefix(self.program.params)}{{ {name}[{', '.join(stmt.iters)}] -> "
            out = []
            for ld in [stmt.target] + loads(stmt.value):
                try:
                    idx = ", ".join(expr_to_isl(i) for i in ld.indices)
                except NotAffine:
                    continue
                out.append((ld, isl.PwMultiAff.from_map(map_(f"{head}{ld.buffer}[{idx}] }}"))))
            self._affine[name] = out
        return self._affine[name]

    def at_domain(self, node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        name = node.user_get_expr().op_get_arg(0).get_id().get_name()
        inverse = isl.PwMultiAff.from_map(isl.Map.from_union_map(build.get_schedule()).reverse())
        found: dict[int, list[isl.AstExpr]] = {}
        for k, (ld, pma) in enumerate(self._accesses(name)):
            idx = pma.pullback_pw_multi_aff(inverse)
            key = -1 if k == 0 else id(ld)
            found[key] = [build.expr_from_pw_aff(idx.get_pw_aff(d))
                          for d in range(idx.dim(isl.dim_type.out))]
        self.found.append(found)
        return node.set_annotation(isl.Id(f"U{len(self.found) - 1}"))


class _Converter:
    def __init__(self, program: Program, info: dict[int, LoopNode], indices: _AccessIndices,
                 depths: dict[int, int], plain: frozenset[int]):
        self.program = program
        self.info = info
        self.indices = indices
        self.depths = depths
        self.plain = plain
        self.taken = set(program.params) | {b.name for b in program.buffers}
        # isl iterators of collapsed parts not yet bound by their loop: -> (fused loop, range)
        self.unbound: dict[str, tuple[int, int, int]] = {}

    def node(self, n: isl.AstNode, names: dict[str, Expr], mark: LoopNode | None) -> Node:
        t = n.get_type()
        if t == isl.ast_node_type.mark:
            loop = self.info[int(n.mark_get_id().get_name()[1:])]
            if _collapsed(loop, self.plain):
                return self.collapse(n.mark_get_node(), names, loop)
            return self.node(n.mark_get_node(), names, loop)
        if t == isl.ast_node_type.for_:
            return self.for_(n, names, mark)
        if t == isl.ast_node_type.if_:
            cond = simplify(self.expr(n.if_get_cond(), names))
            then = self.node(n.if_get_then_node(), names, mark)
            other = self.node(n.if_get_else_node(), names, mark) if n.if_has_else_node() else None
            return If(cond, then, other)
        if t == isl.ast_node_type.block:
            kids = n.block_get_children()
            return Block(tuple(self.node(kids.get_at(k), names, mark)
                               for k in range(kids.n_ast_node())))
        if t == isl.ast_node_type.user:
            return self.user(n, names)
        raise PolyloopError(f"unexpected isl AST node {t}")

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
            added[it] = (loop.id, lo, ext)
        saved = dict(self.unbound)
        self.unbound.update(added)
        body = self.node(n, inner, None)
        self.unbound = saved
        return For(var, Const(0, INDEX, weak=True), Const(total, INDEX, weak=True), body,
                   kind=loop.kind, unroll_factor=loop.unroll_factor, thread=loop.thread,
                   annotations=loop.annotations)

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
        body = self.node(n.for_get_body(), names, None)
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

    def for_(self, n: isl.AstNode, names: dict[str, Expr], mark: LoopNode | None) -> Node:
        it = n.for_get_iterator().get_id().get_name()
        if it in self.unbound:
            return self.guard(n, names)
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
        body = self.node(n.for_get_body(), inner, None)
        if mark is None:
            return For(var, start, stop, body, step=step)
        return For(var, start, stop, body, kind=mark.kind, step=step,
                   unroll_factor=mark.unroll_factor, thread=mark.thread,
                   annotations=mark.annotations)

    def user(self, n: isl.AstNode, names: dict[str, Expr]) -> Node:
        if self.unbound:
            # a part without its own loop (isl found a single value): the collapsed loop would
            # run this statement once per value of that part
            raise _CannotCollapse(next(iter(self.unbound.values()))[0])
        e = n.user_get_expr()
        name = e.op_get_arg(0).get_id().get_name()
        stmt = self.program.statement(name)
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
        t = e.get_type()
        if t == isl.ast_expr_type.id:
            name = e.get_id().get_name()
            if name in names:
                return names[name]
            return Var(name, kind=VarKind.PARAM)
        if t == isl.ast_expr_type.int:
            return Const(e.int_get_val().to_python(), INDEX, weak=True)
        op = e.op_get_type()
        args = [self.expr(e.op_get_arg(k), names) for k in range(e.op_get_n_arg())]
        if op == isl.ast_expr_op_type.minus:
            return Unary(UnaryKind.NEG, args[0], args[0].dtype, weak=True)
        if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
            return Select(args[0], args[1], args[2], args[1].dtype, weak=True)
        kind = _OPS.get(op)
        if kind is None:
            raise PolyloopError(f"unsupported isl AST operation {op}")
        out = args[0]
        for a in args[1:]:
            out = binop(kind, out, a)
        return out


_OPS = {
    isl.ast_expr_op_type.and_: BinOpKind.AND, isl.ast_expr_op_type.and_then: BinOpKind.AND,
    isl.ast_expr_op_type.or_: BinOpKind.OR, isl.ast_expr_op_type.or_else: BinOpKind.OR,
    isl.ast_expr_op_type.max: BinOpKind.MAX, isl.ast_expr_op_type.min: BinOpKind.MIN,
    isl.ast_expr_op_type.add: BinOpKind.ADD, isl.ast_expr_op_type.sub: BinOpKind.SUB,
    isl.ast_expr_op_type.mul: BinOpKind.MUL, isl.ast_expr_op_type.div: BinOpKind.FLOORDIV,
    isl.ast_expr_op_type.fdiv_q: BinOpKind.FLOORDIV, isl.ast_expr_op_type.pdiv_q: BinOpKind.FLOORDIV,
    isl.ast_expr_op_type.pdiv_r: BinOpKind.MOD, isl.ast_expr_op_type.zdiv_r: BinOpKind.MOD,
    isl.ast_expr_op_type.eq: BinOpKind.EQ, isl.ast_expr_op_type.le: BinOpKind.LE,
    isl.ast_expr_op_type.lt: BinOpKind.LT, isl.ast_expr_op_type.ge: BinOpKind.GE,
    isl.ast_expr_op_type.gt: BinOpKind.GT,
}
