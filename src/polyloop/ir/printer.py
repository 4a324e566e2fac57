# SPDX-License-Identifier: Apache-2.0
"""One deterministic text form for expressions and programs (Python-like)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Reduce, Select, Unary, UnaryKind,
                   Var)
from .extern import Extern

if TYPE_CHECKING:
    from .program import Program

# Python operator precedence, higher binds tighter. Conditions print with ``&`` and ``|``, as
# users write them, which bind tighter than comparisons: ``(x > 0) & (i < n)``.
_COMPARE = 4
_PREC = {
    BinOpKind.LT: _COMPARE, BinOpKind.LE: _COMPARE, BinOpKind.GT: _COMPARE,
    BinOpKind.GE: _COMPARE, BinOpKind.EQ: _COMPARE, BinOpKind.NE: _COMPARE,
    BinOpKind.OR: 5, BinOpKind.AND: 6, BinOpKind.ADD: 7, BinOpKind.SUB: 7,
    BinOpKind.MUL: 8, BinOpKind.DIV: 8, BinOpKind.FLOORDIV: 8, BinOpKind.MOD: 8,
}
_UNARY = 9


def expr_to_str(e: Expr, prec: int = 0) -> str:
    if isinstance(e, Const):
        if e.weak:
            return repr(e.value)
        return repr(e.value) if e.dtype.is_float or e.dtype.is_int else str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Load):
        return f"{e.buffer}[{', '.join(expr_to_str(i) for i in e.indices)}]"
    if isinstance(e, BinOp):
        if e.op in (BinOpKind.MIN, BinOpKind.MAX, BinOpKind.POW, BinOpKind.FMOD):
            return f"{e.op.value}({expr_to_str(e.lhs)}, {expr_to_str(e.rhs)})"
        p = _PREC[e.op]
        sym = {BinOpKind.AND: "&", BinOpKind.OR: "|"}.get(e.op, e.op.value)
        left = p + 1 if p == _COMPARE else p    # Python chains a < b < c: never print one
        s = f"{expr_to_str(e.lhs, left)} {sym} {expr_to_str(e.rhs, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, Unary):
        if e.op is UnaryKind.NEG:
            return f"-{expr_to_str(e.operand, _UNARY)}"
        if e.op is UnaryKind.NOT:
            return f"~{expr_to_str(e.operand, _UNARY)}"
        return f"{e.op.value}({expr_to_str(e.operand)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_to_str(e.value)})"
    if isinstance(e, Select):
        return (f"where({expr_to_str(e.cond)}, {expr_to_str(e.true_value)}, "
                f"{expr_to_str(e.false_value)})")
    if isinstance(e, Extern):
        return f"{e.function.name}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, Reduce):
        return (f"{e.kind.value}({expr_to_str(e.source)}, axis=["
                f"{', '.join(a.name for a in e.axes)}])")
    raise TypeError(f"unknown expression node {type(e).__name__}")


_REDUCE_OP = {"sum": "+=", "max": "max=", "min": "min=", "prod": "*="}


def statement_to_str(s: object) -> str:
    from .program import Statement
    assert isinstance(s, Statement)
    lhs = expr_to_str(s.target)
    if s.reduction is None:
        return f"{lhs} = {expr_to_str(s.value)}"
    if s.reduction.value == "sum":
        return f"{lhs} += {expr_to_str(s.value)}"
    return f"{lhs} = {s.reduction.value}({lhs}, {expr_to_str(s.value)})"


def program_to_str(p: Program) -> str:
    lines = [f"# program {p.name}" + (f"  (params: {', '.join(p.params)})" if p.params else "")]
    for b in p.buffers:
        shape = ", ".join(expr_to_str(d) for d in b.shape)
        scope = "" if b.scope.value == "global" else f" @{b.scope.value}"
        lines.append(f"# {b.role.value:6} {b.name}: {b.dtype}[{shape}]{scope}")
    for s in p.statements:
        lines.append(f"{s.name}: {s.domain}")
        lines.append(f"    {statement_to_str(s)}")
    return "\n".join(lines)


def loops_to_str(node: object, indent: int = 0) -> str:
    """Python-like text of a loop AST: ``for i in parallel(0, n):`` ... one statement a line."""
    lines: list[str] = []
    _loop_lines(node, indent, lines)
    return "\n".join(lines)


def _range_text(n: object) -> str:
    from .loops import For
    assert isinstance(n, For)
    start, stop = expr_to_str(n.start), expr_to_str(n.stop)
    args = stop if start == "0" and n.step == 1 else f"{start}, {stop}"
    if n.step != 1:
        args += f", {n.step}"
    kind = n.kind.value
    if kind == "serial":
        return f"range({args})"
    if kind == "unrolled" and n.unroll_factor:
        return f"unrolled({args}, factor={n.unroll_factor})"
    if kind == "thread":
        return f"bind({args}, {str(n.thread)!r})"
    return f"{kind}({args})"


def _loop_lines(node: object, indent: int, out: list[str]) -> None:
    from .loops import Barrier, Block, Call, For, If, Prefetch, Region, Store
    pad = "    " * indent
    if isinstance(node, Block):
        for c in node.body:
            _loop_lines(c, indent, out)
    elif isinstance(node, For):
        notes = "".join(f"  # {k}={v}" for k, v in node.annotations)
        out.append(f"{pad}for {node.var} in {_range_text(node)}:{notes}")
        _loop_lines(node.body, indent + 1, out)
    elif isinstance(node, If):
        out.append(f"{pad}if {expr_to_str(node.cond)}:")
        _loop_lines(node.then, indent + 1, out)
        if node.otherwise is not None:
            out.append(f"{pad}else:")
            _loop_lines(node.otherwise, indent + 1, out)
    elif isinstance(node, Store):
        lhs = f"{node.buffer}[{', '.join(expr_to_str(i) for i in node.indices)}]"
        rhs = expr_to_str(node.value)
        if node.reduction is None:
            out.append(f"{pad}{lhs} = {rhs}")
        elif node.reduction.value == "sum":
            out.append(f"{pad}{lhs} += {rhs}")
        else:
            out.append(f"{pad}{lhs} = {node.reduction.value}({lhs}, {rhs})")
    elif isinstance(node, Barrier):
        out.append(f"{pad}barrier({node.scope!r})")
    elif isinstance(node, Call):
        args = [f"&{a.buffer}[{', '.join(expr_to_str(i) for i in a.indices)}]"
                if isinstance(a, Region) else expr_to_str(a) for a in node.args]
        out.append(f"{pad}{node.function}({', '.join(args)})")
    elif isinstance(node, Prefetch):
        at = f"{node.buffer}[{', '.join(expr_to_str(i) for i in node.indices)}]"
        out.append(f"{pad}prefetch({at}, count={expr_to_str(node.count)}, "
                   f"write={node.write}, locality={node.locality})")
    else:
        raise TypeError(f"unknown loop AST node {type(node).__name__}")
