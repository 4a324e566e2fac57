# SPDX-License-Identifier: Apache-2.0
"""The functions a ``@pl.script`` body may call: math, NumPy and polyloop functions by the
identity of their object, powers, and the helpers of the user's module that are inlined."""
from __future__ import annotations

import ast
import builtins
import inspect
import math
import textwrap
import types
from typing import Any, Callable

import numpy as np

from ..ir import elementwise as ew
from ..ir import quantize as qz
from ..ir.expr import Expr


def _fold(fn: Callable[[Expr, Expr], Expr]) -> Callable[..., Expr]:
    def call(*args: Expr) -> Expr:
        out = args[0]
        for a in args[1:]:
            out = fn(out, a)
        return out
    return call


# function object -> (builder, min args, max args); max None: any number
FUNCTIONS: dict[int, tuple[str, Callable[..., Expr], int, int | None]] = {}


def _register(objs: list[Any], name: str, fn: Callable[..., Expr], lo: int,
              hi: int | None) -> None:
    for o in objs:
        FUNCTIONS[id(o)] = (name, fn, lo, hi)


_register([builtins.max, np.maximum, ew.maximum, np.fmax], "max", _fold(ew.maximum), 2, None)
_register([builtins.min, np.minimum, ew.minimum, np.fmin], "min", _fold(ew.minimum), 2, None)
_register([builtins.abs, math.fabs, np.abs, np.absolute, ew.abs], "abs", ew.abs, 1, 1)
_register([math.exp, np.exp, ew.exp], "exp", ew.exp, 1, 1)
_register([math.log, np.log, ew.log], "log", ew.log, 1, 1)
_register([math.sqrt, np.sqrt, ew.sqrt], "sqrt", ew.sqrt, 1, 1)
_register([math.tanh, np.tanh, ew.tanh], "tanh", ew.tanh, 1, 1)
_register([math.floor, np.floor, ew.floor], "floor", ew.floor, 1, 1)
_register([math.ceil, np.ceil, ew.ceil], "ceil", ew.ceil, 1, 1)
_register([builtins.round, np.round, np.rint, ew.round], "round", ew.round, 1, 1)
_register([math.sin, np.sin, ew.sin], "sin", ew.sin, 1, 1)
_register([math.cos, np.cos, ew.cos], "cos", ew.cos, 1, 1)
_register([math.tan, np.tan, ew.tan], "tan", ew.tan, 1, 1)
_register([math.erf, ew.erf], "erf", ew.erf, 1, 1)
_register([ew.sigmoid], "sigmoid", ew.sigmoid, 1, 1)
_register([math.isnan, np.isnan, ew.isnan], "isnan", ew.isnan, 1, 1)
_register([math.fmod, np.fmod, ew.fmod], "fmod", ew.fmod, 2, 2)
_register([np.where, ew.where], "where", ew.where, 3, 3)
_register([qz.dequantize_linear], "dequantize_linear", qz.dequantize_linear, 2, 3)
POW_FUNCTIONS = (builtins.pow, math.pow, np.power, ew.pow)

# NumPy's scalar types convert a value as ``astype`` does: ``np.int32(A[i, k])``
NUMPY_CASTS: dict[int, str] = {id(t): np.dtype(t).name for t in (
    np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64)}

# functions whose last argument is a dtype (a string or a NumPy type): name -> (function,
# number of value arguments before it, of which the trailing ones may be left out)
DTYPE_FUNCTIONS: dict[int, tuple[str, Callable[..., Expr], int, int]] = {
    id(qz.saturate): ("saturate", qz.saturate, 1, 1),
    id(qz.requantize): ("requantize", qz.requantize, 3, 2),
    id(qz.quantize_linear): ("quantize_linear", qz.quantize_linear, 3, 2),
}


def constant_exponent(node: ast.expr) -> int | float | None:
    """The value of a constant exponent (``2``, ``-1``, ``0.5``), else None."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return sign * node.value
    return None


def int_power(base: Expr, k: int) -> Expr:
    """base ** k (k >= 1) with about log2(k) multiplications."""
    out: Expr | None = None
    square = base
    while k:
        if k & 1:
            out = square if out is None else out * square
        k >>= 1
        if k:
            square = square * square
    assert out is not None
    return out


def helper_body(fn: types.FunctionType) -> tuple[list[ast.stmt] | None, list[str]]:
    """The body (``name = expr`` lines, then ``return expr``) and parameters of a helper."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None, []
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef):
        return None, []
    a = fdef.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        return None, []
    body = [st for st in fdef.body if not (isinstance(st, ast.Expr)
                                           and isinstance(st.value, ast.Constant))]
    ok = body and isinstance(body[-1], ast.Return) and body[-1].value is not None and all(
        isinstance(st, ast.Assign) and len(st.targets) == 1
        and isinstance(st.targets[0], ast.Name) for st in body[:-1])
    return (body if ok else None), [x.arg for x in a.args]
