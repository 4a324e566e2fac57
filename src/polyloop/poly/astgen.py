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
from .isl_util import CTX, NotAffine, expr_to_isl, map_, params_prefix, set_
from .tree import LoopNode, Root, StmtNode, loops, statements_under


def _filter_text(program: Program, stmts: list[str]) -> str:
    parts = [f"{s}[{', '.join(program.statement(s).iters)}]" for s in stmts]
    return f"{params_prefix(program.params)}{{ {'; '.join(parts)} }}"


def _band_text(program: Program, node: LoopNode) -> str:
    um = None
    for stmt, text in node.exprs:
        if not text.lstrip().startswith("["):
            text = params_prefix(program.params) + text
        m = isl.UnionMap.from_map(map_(text))
        um = m if um is None else um.union(m)
    return str(isl.MultiUnionPwAff.from_union_map(um))


def _yaml(program: Program, kids: tuple, indent: int) -> list[str]:
    pad = " " * indent
    if not kids:
        return []
    if len(kids) == 1:
        return _yaml_node(program, kids[0], indent)
    lines = [f"{pad}sequence:"]
    for c in kids:
        lines.append(f'{pad}- filter: "{_filter_text(program, statements_under(c))}"')
        sub = _yaml_node(program, c, indent + 2)
        if sub:
            lines.append(f"{pad}  child:")
            lines.extend(_yaml_node(program, c, indent + 4))
    return lines


def _yaml_node(program: Program, node: object, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(node, StmtNode):
        return []
    assert isinstance(node, LoopNode)
    lines = [f'{pad}mark: "L{node.id}"', f"{pad}child:",
             f'{pad}  schedule: "{_band_text(program, node)}"']
    sub = _yaml(program, node.children, indent + 4)
    if sub:
        lines.append(f"{pad}  child:")
        lines.extend(sub)
    return lines


def isl_schedule(program: Program, root: Root) -> isl.Schedule:
    doms = None
    for s in program.statements:
        d = isl.UnionSet.from_set(domain(program, s))
        doms = d if doms is None else doms.union(d)
    if doms is None:
        raise PolyloopError(f"program '{program.name}' has no statements")
    lines = [f'domain: "{doms}"']
    body = _yaml(program, root.children, 2)
    if body:
        lines.append("child:")
        lines.extend(body)
    return isl.Schedule.read_from_str(CTX, "\n".join(lines))


def context(program: Program) -> isl.Set:
    """What is known about the parameters: sizes are non-negative, plus the user's assumptions."""
    pre = params_prefix(program.params)
    cons = " and ".join(f"{p} >= 0" for p in program.params)
    ctx = set_(f"{pre}{{ : {cons} }}" if cons else "{ : }")
    if program.assumptions:
        ctx = ctx.intersect(set_(program.assumptions))
    return ctx


def build_ast(program: Program, root: Root) -> Node:
    """The loop AST of ``program`` executed in the order of ``root``."""
    sched = isl_schedule(program, root)
    build = isl.AstBuild.from_context(context(program))
    indices = _AccessIndices(program)
    build, _ = build.set_at_each_domain(indices.at_domain)
    ast = build.node_from_schedule(sched)
    info = {n.id: n for n in loops(root)}
    conv = _Converter(program, info, indices)
    return conv.node(ast, {}, None)


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
    def __init__(self, program: Program, info: dict[int, LoopNode], indices: _AccessIndices):
        self.program = program
        self.info = info
        self.indices = indices
        self.taken = set(program.params) | {b.name for b in program.buffers}

    def node(self, n: isl.AstNode, names: dict[str, Expr], mark: LoopNode | None) -> Node:
        t = n.get_type()
        if t == isl.ast_node_type.mark:
            loop = self.info[int(n.mark_get_id().get_name()[1:])]
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

    def for_(self, n: isl.AstNode, names: dict[str, Expr], mark: LoopNode | None) -> Node:
        it = n.for_get_iterator().get_id().get_name()
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
