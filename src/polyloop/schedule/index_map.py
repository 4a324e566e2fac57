# SPDX-License-Identifier: Apache-2.0
"""Index maps read back from a trace: ``"lambda x0, x1: (x1 // 16, x0, x1 % 16)"``.

A trace may come from a file or a shared tuning database, so its text is never evaluated as
Python. It is parsed with ``ast`` and accepted only if it is a lambda over plain parameters
whose body is a tuple of integer expressions: the parameters, integer constants, ``+ - * //
%``, unary minus and ``min``/``max`` of two operands -- what ``transform_layout`` records.
Anything else is a ``ParseError`` and nothing of the text runs.

>>> fn = parse_index_map("lambda x0, x1: (x1 // 16, x0, x1 % 16)")
>>> from polyloop.ir.expr import Var
>>> [str(e) for e in fn(Var("k"), Var("j"))]
['j // 16', 'k', 'j % 16']
>>> try:
...     parse_index_map("lambda x0: (__import__('os').system('true'),)")
... except ParseError as e:
...     print(str(e).split(";")[0])
index map in a trace: a call of "__import__('os').system" is not allowed
"""
from __future__ import annotations

import ast
from typing import Any, Callable

from ..errors import ParseError
from ..ir.elementwise import maximum, minimum

MAX_TEXT = 10_000     # characters: a recorded map is a few dozen
MAX_DEPTH = 50        # levels of the expression tree
MAX_CONSTANT = 2**62  # larger constants are no index of a buffer polyloop can allocate

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
}
_CALLS = {"min": minimum, "max": maximum}
ALLOWED = "parameters, integer constants, + - * // %, unary -, min(a, b) and max(a, b)"


def _refuse(what: str) -> ParseError:
    return ParseError(f"index map in a trace: {what}; an index map is a lambda whose body is a "
                      f"tuple of {ALLOWED}")


def _check(node: ast.AST, params: frozenset[str], depth: int = 0) -> None:
    """Raise ParseError unless ``node`` is built from the whitelist only."""
    if depth > MAX_DEPTH:
        raise _refuse(f"the expression is nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise _refuse(f"the name {node.id!r} is not a parameter of the lambda")
    elif isinstance(node, ast.Constant):
        if type(node.value) is not int or abs(node.value) > MAX_CONSTANT:
            raise _refuse(f"the constant {node.value!r:.40} is not an integer below 2**62")
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, params, depth + 1)
        _check(node.right, params, depth + 1)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand, params, depth + 1)
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)[:40]
        if name not in _CALLS or node.keywords or len(node.args) != 2:
            raise _refuse(f"a call of {name!r} is not allowed")
        for a in node.args:
            _check(a, params, depth + 1)
    else:
        raise _refuse(f"{type(node).__name__} is not allowed")


def _evaluate(node: ast.AST, env: dict[str, Any]) -> Any:
    """The value of a checked expression, with the lambda's parameters bound in ``env``."""
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return _CALLS[node.func.id](*(_evaluate(a, env) for a in node.args))


def _lambda(text: object) -> ast.Lambda:
    if not isinstance(text, str):
        raise _refuse(f"expected the map's text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise _refuse(f"the text is {len(text)} characters long (at most {MAX_TEXT})")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise _refuse(f"{text[:60]!r} is not Python ({type(e).__name__})") from None
    fn = tree.body
    if not isinstance(fn, ast.Lambda):
        raise _refuse(f"{text[:60]!r} is not a lambda")
    a = fn.args
    if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults:
        raise _refuse("the lambda may only have plain parameters")
    return fn


def parse_index_map(text: object) -> Callable[..., tuple[Any, ...]]:
    """The index map ``text`` describes, as a function of index expressions; ParseError for any
    text outside the whitelist (nothing of it is executed)."""
    fn = _lambda(text)
    params = [p.arg for p in fn.args.args]
    if len(set(params)) != len(params):
        raise _refuse("a parameter is listed twice")
    body = fn.body.elts if isinstance(fn.body, ast.Tuple) else [fn.body]
    for e in body:
        _check(e, frozenset(params))

    def index_map(*indices: Any) -> tuple[Any, ...]:
        if len(indices) != len(params):
            raise ParseError(f"index map in a trace takes {len(params)} indices, got "
                             f"{len(indices)}")
        env = dict(zip(params, indices))
        return tuple(_evaluate(e, env) for e in body)
    return index_map
