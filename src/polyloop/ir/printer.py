# SPDX-License-Identifier: Apache-2.0
"""The text form of the loop AST (Python-like); expressions and programs print themselves
(``expr.expr_to_str``, ``program.program_to_str``)."""
from __future__ import annotations

from .expr import BinOpKind, Const, binop, expr_to_str
from .loops import Barrier, Block, Call, For, If, Prefetch, Region, Store
from .simplify import simplify


def loops_to_str(node: object, indent: int = 0) -> str:
    """Python-like text of a loop AST: ``for i in parallel(0, n):`` ... one statement a line."""
    lines: list[str] = []
    _loop_lines(node, indent, lines)
    return "\n".join(lines)


def _range_text(n: For) -> str:
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
    pad = "    " * indent
    if isinstance(node, Block):
        for c in node.body:
            _loop_lines(c, indent, out)
    elif isinstance(node, For) and _binds_one_value(node):
        out.append(f"{pad}{node.var} = {expr_to_str(node.start)}")
        _loop_lines(node.body, indent, out)
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


def _binds_one_value(n: For) -> bool:
    """A serial loop of exactly one iteration whatever the sizes (a fused loop's recovered
    iterator): printed as the assignment it is."""
    if n.kind.value != "serial" or n.step != 1 or n.annotations:
        return False
    d = simplify(binop(BinOpKind.SUB, n.stop, n.start))
    return isinstance(d, Const) and d.value == 1
