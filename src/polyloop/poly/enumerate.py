# SPDX-License-Identifier: Apache-2.0
"""Enumerate the integer points of a statement's domain for given size parameters.

isl builds a loop nest that scans the (parametric) domain in lexicographic order; the nest is
turned into a Python generator once per domain and reused for every parameter value. This is
exact for triangular, strided and non-convex domains because isl computes the bounds.
"""
from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable, Iterator

import islpy as isl

from ..errors import PolyloopError
from ..ir.program import Program, Statement
from .access import domain

DEFAULT_LIMIT = 2_000_000

PointGenerator = Callable[..., Iterator[tuple[int, ...]]]


def points(program: Program, stmt: Statement, params: dict[str, int], *,
           limit: int = DEFAULT_LIMIT) -> list[tuple[int, ...]]:
    """All points of ``stmt``'s domain with the size parameters fixed, in lexicographic order.

    Raises PolyloopError when a parameter the domain uses has no value, when the domain is
    unbounded, or when it has more than ``limit`` points.

    >>> from polyloop.ir.dtypes import DType
    >>> from polyloop.ir.expr import Var, const
    >>> from polyloop.ir.program import Buffer, BufferRole, Program, Statement, param
    >>> L = Buffer("L", (param("n"), param("n")), DType.FLOAT32, BufferRole.OUTPUT)
    >>> S = Statement("S", ("i", "j"), "[n] -> { S[i, j] : 0 <= j <= i < n }", "L",
    ...               (Var("i"), Var("j")), const(1.0, "float32"))
    >>> points(Program("tri", (L,), (S,), ("n",), ("L",)), S, {"n": 3})
    [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2)]
    """
    dom = domain(program, stmt)
    names = _param_names(dom)
    used = [dom.involves_dims(isl.dim_type.param, k, 1) for k in range(len(names))]
    missing = [p for p, u in zip(names, used) if u and p not in params]
    if missing:
        raise PolyloopError(f"the domain of statement '{stmt.name}' uses size parameter(s) "
                            f"{', '.join(missing)} with no value; given: {_env(params) or 'none'}")
    # a parameter the domain does not involve may take any value
    values = [int(params[p]) if p in params else 0 for p in names]
    if not _fix(dom, values).is_bounded():
        raise PolyloopError(f"the domain of statement '{stmt.name}' is unbounded for "
                            f"{_env(params)}: {stmt.domain}; bound every iterator on both sides")
    scan = _scanner(dom.to_str())
    out = list(itertools.islice(scan(*values), limit + 1))
    if len(out) > limit:
        sizes = f"for {_env(params)}" if params else "at its constant sizes"
        raise PolyloopError(f"statement '{stmt.name}' has more than {limit} points {sizes}; "
                            "interpret it with smaller sizes (or raise limit=)")
    return out


def _env(params: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _param_names(s: isl.Set) -> list[str]:
    return [s.get_dim_name(isl.dim_type.param, k) for k in range(s.dim(isl.dim_type.param))]


def _fix(s: isl.Set, values: list[int]) -> isl.Set:
    for k, v in enumerate(values):
        s = s.fix_val(isl.dim_type.param, k, isl.Val(str(v)))
    return s.project_out(isl.dim_type.param, 0, len(values))


@lru_cache(maxsize=1024)
def _scanner(domain_text: str) -> PointGenerator:
    """A generator function ``scan(*param_values)`` yielding the points of the domain in order."""
    dom = isl.Set(domain_text)
    params = _param_names(dom)
    schedule = isl.Map.identity(dom.get_space().map_from_set()).intersect_domain(dom)
    build = isl.AstBuild.from_context(isl.Set.universe(dom.params().get_space()))
    node = build.node_from_schedule_map(isl.UnionMap.from_map(schedule))
    names = {p: f"p_{k}" for k, p in enumerate(params)}
    lines = [f"def scan({', '.join(names.values())}):"]
    _emit(node, names, lines, 1)
    lines.append("    return")
    lines.append("    yield ()")  # makes scan a generator even for an empty domain
    namespace: dict[str, object] = {}
    exec(compile("\n".join(lines), f"<points of {domain_text}>", "exec"), namespace)
    return namespace["scan"]  # type: ignore[return-value]


def _emit(node: isl.AstNode, names: dict[str, str], out: list[str], depth: int) -> None:
    pad = "    " * depth
    kind = node.get_type()
    if kind == isl.ast_node_type.block:
        children = node.block_get_children()
        for k in range(children.n_ast_node()):
            _emit(children.get_at(k), names, out, depth)
    elif kind == isl.ast_node_type.for_:
        _emit_for(node, names, out, depth)
    elif kind == isl.ast_node_type.if_:
        out.append(f"{pad}if {_expr(node.if_get_cond(), names)}:")
        _emit(node.if_get_then_node(), names, out, depth + 1)
        if node.if_has_else_node():
            out.append(f"{pad}else:")
            _emit(node.if_get_else_node(), names, out, depth + 1)
    elif kind == isl.ast_node_type.user:
        call = node.user_get_expr()
        args = [_expr(call.get_op_arg(k), names) for k in range(1, call.get_op_n_arg())]
        out.append(f"{pad}yield ({''.join(a + ', ' for a in args)})")
    elif kind == isl.ast_node_type.mark:
        _emit(node.mark_get_node(), names, out, depth)
    else:
        raise PolyloopError(f"unexpected isl AST node {kind} while enumerating a domain")


def _emit_for(node: isl.AstNode, names: dict[str, str], out: list[str], depth: int) -> None:
    pad = "    " * depth
    it = node.for_get_iterator().get_id().get_name()
    names = {**names, it: f"c_{len(names)}"}
    var = names[it]
    init = _expr(node.for_get_init(), names)
    inc = _expr(node.for_get_inc(), names)
    cond = node.for_get_cond()
    bound = _upper_bound(cond, it)
    if bound is not None:
        stop = _expr(bound[0], names) + (" + 1" if bound[1] else "")
        out.append(f"{pad}for {var} in range({init}, {stop}, {inc}):")
        _emit(node.for_get_body(), names, out, depth + 1)
        return
    out.append(f"{pad}{var} = {init}")
    out.append(f"{pad}while {_expr(cond, names)}:")
    _emit(node.for_get_body(), names, out, depth + 1)
    out.append(f"{pad}    {var} += {inc}")


def _upper_bound(cond: isl.AstExpr, iterator: str) -> tuple[isl.AstExpr, bool] | None:
    """(bound, inclusive) when ``cond`` reads ``iterator <= bound`` or ``iterator < bound``."""
    if cond.get_type() != isl.ast_expr_type.op:
        return None
    op = cond.get_op_type()
    if op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
        return None
    lhs = cond.get_op_arg(0)
    if lhs.get_type() != isl.ast_expr_type.id or lhs.get_id().get_name() != iterator:
        return None
    return cond.get_op_arg(1), op == isl.ast_expr_op_type.le


_BINARY = {
    isl.ast_expr_op_type.add: "+", isl.ast_expr_op_type.sub: "-", isl.ast_expr_op_type.mul: "*",
    isl.ast_expr_op_type.div: "//", isl.ast_expr_op_type.fdiv_q: "//",
    isl.ast_expr_op_type.pdiv_q: "//", isl.ast_expr_op_type.pdiv_r: "%",
    isl.ast_expr_op_type.zdiv_r: "%", isl.ast_expr_op_type.eq: "==",
    isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<",
    isl.ast_expr_op_type.ge: ">=", isl.ast_expr_op_type.gt: ">",
    isl.ast_expr_op_type.and_: "and", isl.ast_expr_op_type.and_then: "and",
    isl.ast_expr_op_type.or_: "or", isl.ast_expr_op_type.or_else: "or",
}


def _expr(e: isl.AstExpr, names: dict[str, str]) -> str:
    """Python text of an isl AST expression (integer arithmetic with floor semantics)."""
    kind = e.get_type()
    if kind == isl.ast_expr_type.int:
        return f"({e.get_val().to_python()})"
    if kind == isl.ast_expr_type.id:
        name = e.get_id().get_name()
        if name not in names:
            raise PolyloopError(f"isl AST refers to unknown name '{name}'")
        return names[name]
    op = e.get_op_type()
    args = [_expr(e.get_op_arg(k), names) for k in range(e.get_op_n_arg())]
    if op in _BINARY:
        return f"({args[0]} {_BINARY[op]} {args[1]})"
    if op == isl.ast_expr_op_type.minus:
        return f"(-{args[0]})"
    if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
        return f"{'min' if op == isl.ast_expr_op_type.min else 'max'}({', '.join(args)})"
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        return f"({args[1]} if {args[0]} else {args[2]})"
    raise PolyloopError(f"unexpected isl AST operation {op} while enumerating a domain")
