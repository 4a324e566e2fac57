# SPDX-License-Identifier: Apache-2.0
"""isl AST expressions as polyloop expressions, and what an isl AST node runs."""
from __future__ import annotations

import islpy as isl

from ..errors import PolyloopError
from ..ir.dtypes import INDEX
from ..ir.expr import BinOp, BinOpKind, Const, Expr, Select, Unary, UnaryKind, Var, VarKind, binop


def ast_expr(e: isl.AstExpr, names: dict[str, Expr], *, strict_bounds: bool = False) -> Expr:
    """polyloop's expression for an isl AST expression: isl identifiers become ``names[id]``
    (size parameters otherwise); with ``strict_bounds``, ``n >= x + 1`` is written ``x < n``."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        name = e.get_id().get_name()
        if name in names:
            return names[name]
        return Var(name, kind=VarKind.PARAM)
    if t == isl.ast_expr_type.int:
        return Const(e.int_get_val().to_python(), INDEX, weak=True)
    op = e.op_get_type()
    args = [ast_expr(e.op_get_arg(k), names, strict_bounds=strict_bounds)
            for k in range(e.op_get_n_arg())]
    if op == isl.ast_expr_op_type.minus:
        return Unary(UnaryKind.NEG, args[0], args[0].dtype, weak=True)
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        return Select(args[0], args[1], args[2], args[1].dtype, weak=True)
    kind = _OPS.get(op)
    if kind is None:
        raise PolyloopError(f"unsupported isl AST operation {op}")
    if strict_bounds and kind in (BinOpKind.GE, BinOpKind.LE):
        tidy = _strict(kind, args[0], args[1])
        if tidy is not None:
            return tidy
    out = args[0]
    for a in args[1:]:
        out = binop(kind, out, a)
    return out


def statements_in(n: isl.AstNode) -> set[str]:
    """The statements an isl AST node runs."""
    t = n.get_type()
    if t == isl.ast_node_type.user:
        return {n.user_get_expr().op_get_arg(0).get_id().get_name()}
    if t == isl.ast_node_type.for_:
        return statements_in(n.for_get_body())
    if t == isl.ast_node_type.mark:
        return statements_in(n.mark_get_node())
    if t == isl.ast_node_type.if_:
        out = statements_in(n.if_get_then_node())
        return out | statements_in(n.if_get_else_node()) if n.if_has_else_node() else out
    if t == isl.ast_node_type.block:
        kids = n.block_get_children()
        return set().union(*(statements_in(kids.get_at(k)) for k in range(kids.n_ast_node())))
    return set()


def _strict(kind: BinOpKind, a: Expr, b: Expr) -> Expr | None:
    """``a >= b + 1`` as ``b < a``, ``a <= b - 1`` as ``a < b``; None for other shapes."""
    if not (isinstance(b, BinOp) and isinstance(b.rhs, Const) and b.rhs.value == 1):
        return None
    if kind is BinOpKind.GE and b.op is BinOpKind.ADD:
        return binop(BinOpKind.LT, b.lhs, a)
    if kind is BinOpKind.LE and b.op is BinOpKind.SUB:
        return binop(BinOpKind.LT, a, b.lhs)
    return None


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
