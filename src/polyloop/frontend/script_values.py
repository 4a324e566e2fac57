# SPDX-License-Identifier: Apache-2.0
"""Compile-time values of a ``@pl.script`` function: annotations and ``pl.alloc`` arguments.

These are read from the source text, so they are evaluated here from the syntax tree against a
short list of what they may contain (numbers, strings, tuples, names and attributes of the
function's module, ``pl.Buffer[...]`` and size arithmetic); nothing is ever passed to ``eval``,
and a call, a lambda or a comprehension in an annotation is refused instead of run.

>>> import ast, numpy as np
>>> node = ast.parse('(("n", 4), np.float32)', mode="eval").body
>>> literal(node, {"np": np})
(('n', 4), <class 'numpy.float32'>)
"""
from __future__ import annotations

import ast
import operator
import types
from typing import Any

import numpy as np

from ..errors import PolyloopError
from ..ir.expr import Expr
from ..ir.program import Buffer

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv}


class NotLiteral(PolyloopError):
    """A node a compile-time value may not contain; the message says which and why."""


def literal(node: ast.expr, env: dict[str, Any]) -> Any:
    """The value of ``node`` (an annotation or a ``pl.alloc`` argument) in the module ``env``.

    Raises NotLiteral for anything that would run user code (calls, lambdas, comprehensions,
    attributes of objects that are not modules or classes)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(literal(e, env) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise NotLiteral(f"unknown name '{node.id}'")
        return env[node.id]
    if isinstance(node, ast.Attribute):
        return _attribute(node, literal(node.value, env))
    if isinstance(node, ast.Subscript):
        return _subscript(node, env)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _arithmetic_operand(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _arithmetic_operand(node.left, env), _arithmetic_operand(node.right, env)
        return _BINOPS[type(node.op)](a, b)
    raise NotLiteral(f"{ast.unparse(node)} is not a constant: annotations and pl.alloc arguments "
                     "hold numbers, strings, tuples, names (pl.Buffer, np.float32, a pl.var "
                     "size) and + - * // on sizes; calls are not evaluated")


def _attribute(node: ast.Attribute, base: Any) -> Any:
    # only modules and classes: a property of an arbitrary object would run its code
    if not isinstance(base, (types.ModuleType, type)) or node.attr.startswith("__"):
        raise NotLiteral(f"{ast.unparse(node)}: only attributes of modules and classes "
                         "(pl.Buffer, np.float32) are read")
    try:
        return getattr(base, node.attr)
    except AttributeError:
        raise NotLiteral(f"'{ast.unparse(node)}' does not exist") from None


def _subscript(node: ast.Subscript, env: dict[str, Any]) -> Any:
    base = literal(node.value, env)
    if base is not Buffer:
        raise NotLiteral(f"{ast.unparse(node)}: only pl.Buffer[shape, dtype] is subscripted in "
                         "an annotation")
    return Buffer[literal(node.slice, env)]


def _arithmetic_operand(node: ast.expr, env: dict[str, Any]) -> Any:
    v = literal(node, env)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer, Expr)):
        raise NotLiteral(f"{ast.unparse(node)}: size arithmetic takes integers and pl.var sizes")
    return v
