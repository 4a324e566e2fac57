# SPDX-License-Identifier: Apache-2.0
"""Expressions of ``@pl.script`` functions: Python AST nodes to polyloop expressions.

Values become ``ir.expr`` nodes; loop bounds and ``if`` conditions become isl text (they must be
affine in loop variables and size parameters). Calls are resolved by the identity of the
function object the name refers to, so ``math.exp``, ``np.exp``, ``pl.exp`` and
``from math import exp`` all mean the same.
"""
from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import DTypeError, ParseError, PolyloopError
from ..ir import elementwise as ew
from ..ir.dtypes import as_dtype
from ..ir.expr import (BinOpKind, Const, Expr, UnaryKind, Var, VarKind, binop, cast, const, select,
                       unary)
from ..ir.program import Buffer
from ..poly.isl_util import NotAffine, expr_to_isl
from .script_calls import (DTYPE_FUNCTIONS, FUNCTIONS, NUMPY_CASTS, POW_FUNCTIONS,
                           constant_exponent, helper_body, int_power)

# isl keywords cannot name loop variables or sizes (they would not parse in a domain)
_MAX_INLINE_DEPTH = 16
ISL_RESERVED = frozenset({"and", "or", "not", "mod", "floor", "ceil", "min", "max", "exists",
                          "infty", "true", "false", "implies", "xor"})


@dataclass
class Scope:
    """What names mean inside the function body."""
    env: dict[str, Any]                      # globals, closure variables and builtins
    buffers: dict[str, Buffer] = field(default_factory=dict)
    params: dict[str, None] = field(default_factory=dict)
    loops: list[str] = field(default_factory=list)
    # names that stand for an expression: a downward loop's variable, a helper's parameter
    aliases: dict[str, Expr] = field(default_factory=dict)
    # zero-dimensional buffers read and written by their bare name (scalar variables, values)
    scalars: dict[str, bool] = field(default_factory=dict)


class ExprParser:
    """Turns expression nodes into polyloop expressions; ``fail`` raises a located ParseError."""

    def __init__(self, scope: Scope, fail: Callable[[ast.AST, str], ParseError]):
        self.scope = scope
        self.fail = fail
        self.depth = 0      # helpers being inlined around this parser

    # values ------------------------------------------------------------------------------------
    def value(self, node: ast.expr) -> Expr:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.fail(node, f"{_describe(node)} is not supported in a @pl.script "
                                  "expression; use arithmetic, buffer elements, loop variables, "
                                  "sizes, constants and max/min/math functions")
        try:
            return method(node)
        except DTypeError as e:
            raise self.fail(node, str(e)) from None
        except PolyloopError as e:
            if isinstance(e, ParseError):
                raise
            raise self.fail(node, str(e)) from None

    def _Constant(self, node: ast.Constant) -> Expr:
        if isinstance(node.value, (bool, int, float)):
            return const(node.value)
        raise self.fail(node, f"constant {node.value!r} is not a number")

    def _Name(self, node: ast.Name) -> Expr:
        name = node.id
        if name in self.scope.aliases:
            return self.scope.aliases[name]
        if name in self.scope.scalars:
            return self.scope.buffers[name][()]
        if name in self.scope.loops:
            return Var(name, VarKind.ITER)
        if name in self.scope.params:
            return Var(name, VarKind.PARAM)
        if name in self.scope.buffers:
            raise self.fail(node, f"buffer '{name}' is used as a value; index it: {name}[...]")
        if name in self.scope.env:
            v = self.scope.env[name]
            if isinstance(v, Var) and v.kind is VarKind.PARAM:
                self.scope.params.setdefault(v.name)
                return v
            if isinstance(v, (bool, int, float, np.integer, np.floating)):
                return const(v.item() if isinstance(v, np.generic) else v)
            raise self.fail(node, f"'{name}' is a {type(v).__name__}, not a number, loop variable "
                                  "or buffer")
        raise self.fail(node, f"unknown name '{name}': not a loop variable, size, buffer or "
                              "constant of the enclosing module")

    def _BinOp(self, node: ast.BinOp) -> Expr:
        if isinstance(node.op, ast.Pow):
            return self._power(node)
        ops = {ast.Add: BinOpKind.ADD, ast.Sub: BinOpKind.SUB, ast.Mult: BinOpKind.MUL,
               ast.Div: BinOpKind.DIV, ast.FloorDiv: BinOpKind.FLOORDIV, ast.Mod: BinOpKind.MOD}
        kind = ops.get(type(node.op))
        if kind is None:
            raise self.fail(node, f"operator {type(node.op).__name__} is not supported")
        return binop(kind, self.value(node.left), self.value(node.right))

    def _power(self, node: ast.BinOp) -> Expr:
        return self.power(node, self.value(node.left), node.right)

    def power(self, node: ast.AST, base: Expr, exponent: ast.expr) -> Expr:
        """``base ** exponent``: a constant integer exponent by repeated squaring (a negative
        one as a reciprocal), a half through sqrt, anything else through C's pow."""
        k = constant_exponent(exponent)
        if isinstance(k, float) and k.is_integer() and abs(k) <= 64:
            base, k = cast(as_dtype("float64"), base) if not base.dtype.is_float else base, int(k)
        if isinstance(k, int) and abs(k) <= 64:
            if k == 0:
                return base * 0 + 1
            out = int_power(base, abs(k))
            return out if k > 0 else 1.0 / out
        if k in (0.5, -0.5):
            root = ew.sqrt(base)
            return root if k > 0 else 1.0 / root
        return ew.pow(base, self.value(exponent))

    def _UnaryOp(self, node: ast.UnaryOp) -> Expr:
        v = self.value(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Not):
            return unary(UnaryKind.NOT, v)
        raise self.fail(node, "bitwise '~' is not supported; use 'not' on conditions")

    def _Compare(self, node: ast.Compare) -> Expr:
        ops = {ast.Lt: BinOpKind.LT, ast.LtE: BinOpKind.LE, ast.Gt: BinOpKind.GT,
               ast.GtE: BinOpKind.GE, ast.Eq: BinOpKind.EQ, ast.NotEq: BinOpKind.NE}
        left = self.value(node.left)
        out: Expr | None = None
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in ops:
                raise self.fail(node, f"comparison {type(op).__name__} is not supported")
            right = self.value(right_node)
            term = binop(ops[type(op)], left, right)
            out = term if out is None else binop(BinOpKind.AND, out, term)
            left = right
        assert out is not None
        return out

    def _BoolOp(self, node: ast.BoolOp) -> Expr:
        kind = BinOpKind.AND if isinstance(node.op, ast.And) else BinOpKind.OR
        vals = [self.value(v) for v in node.values]
        out = vals[0]
        for v in vals[1:]:
            out = binop(kind, out, v)
        return out

    def _IfExp(self, node: ast.IfExp) -> Expr:
        return select(self.value(node.test), self.value(node.body), self.value(node.orelse))

    def _Subscript(self, node: ast.Subscript) -> Expr:
        shape = self._shape_lookup(node)
        if shape is not None:
            return shape
        buf, idx = self.element(node)
        return buf[tuple(idx)]

    def _Call(self, node: ast.Call) -> Expr:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype":
            if len(node.args) != 1 or node.keywords:
                raise self.fail(node, "astype() takes one argument, the dtype: "
                                      "x.astype(np.int32) or x.astype('int32')")
            return cast(self.dtype_argument(node.args[0]), self.value(node.func.value))
        fn = self.resolve(node.func)
        if id(fn) in NUMPY_CASTS:
            if len(node.args) != 1 or node.keywords:
                raise self.fail(node, f"{ast.unparse(node.func)}() takes one argument")
            return cast(as_dtype(NUMPY_CASTS[id(fn)]), self.value(node.args[0]))
        if id(fn) in DTYPE_FUNCTIONS:
            return self._dtype_call(node, *DTYPE_FUNCTIONS[id(fn)])
        if any(fn is p for p in POW_FUNCTIONS):
            if len(node.args) != 2 or node.keywords:
                raise self.fail(node, "pow() takes two arguments: pow(x, 2)")
            return self.power(node, self.value(node.args[0]), node.args[1])
        entry = FUNCTIONS.get(id(fn))
        if entry is None:
            if fn is float or fn is int:
                return self._cast(node, "float64" if fn is float else "int64")
            if getattr(fn, "extern_function", None) is not None:
                if node.keywords:
                    raise self.fail(node, f"extern '{fn.__name__}' takes positional arguments")
                return fn(*[self.value(a) for a in node.args])
            if isinstance(fn, types.FunctionType):
                return self._inline(node, fn)
            raise self.fail(node, f"call to unknown function '{ast.unparse(node.func)}'; "
                                  "supported: max, min, abs, pow and exp, log, sqrt, tanh, floor, "
                                  "where (from math, numpy or polyloop), and small functions "
                                  "of your module that return an expression")
        name, builder, lo, hi = entry
        if node.keywords:
            raise self.fail(node, f"{name}() takes positional arguments only")
        n = len(node.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}"
            raise self.fail(node, f"{name}() takes {want} arguments, got {n}")
        return builder(*[self.value(a) for a in node.args])

    def _dtype_call(self, node: ast.Call, name: str, fn: Callable[..., Expr], values: int,
                    required: int) -> Expr:
        """``saturate(x, "int8")``, ``requantize(x, scale, zero_point, dtype=np.uint8)``: the
        value arguments, then the dtype (positional or ``dtype=``)."""
        args, dtype = list(node.args), None
        for kw in node.keywords:
            if kw.arg != "dtype":
                raise self.fail(node, f"{name}() takes the keyword dtype= only")
            dtype = kw.value
        if dtype is None and len(args) == values + 1:
            dtype = args.pop()
        if dtype is None or not required <= len(args) <= values:
            raise self.fail(node, f"{name}() takes {required} to {values} values and a dtype, "
                                  f"like {name}(x{', 0.5, 3' if values > 1 else ''}, 'int8')")
        return fn(*[self.value(a) for a in args], dtype=self.dtype_argument(dtype))

    def dtype_argument(self, node: ast.expr) -> Any:
        """A dtype written as a string (``"int8"``) or a NumPy type (``np.int8``)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            found = self.resolve(node)
            if id(found) not in NUMPY_CASTS:
                raise self.fail(node, f"{ast.unparse(node)} is not a dtype; write 'int8' or "
                                      "np.int8")
            text = NUMPY_CASTS[id(found)]
        try:
            return as_dtype(text)
        except PolyloopError as e:
            raise self.fail(node, str(e)) from None

    def _inline(self, node: ast.Call, fn: types.FunctionType) -> Expr:
        """A helper of the module (PolyBench's macros): its arguments are computed here and
        its ``return`` expression is read with its parameters standing for them."""
        if self.depth >= _MAX_INLINE_DEPTH:
            raise self.fail(node, f"helper '{fn.__name__}' calls helpers more than "
                                  f"{_MAX_INLINE_DEPTH} deep (recursion cannot be inlined)")
        body, params = helper_body(fn)
        if body is None:
            raise self.fail(node, f"helper '{fn.__name__}' cannot be inlined: a helper's body is "
                                  "name = expression lines and one return of an expression, "
                                  "with positional parameters (its source must be readable)")
        if node.keywords or len(node.args) != len(params):
            raise self.fail(node, f"helper '{fn.__name__}' takes {len(params)} positional "
                                  f"arguments ({', '.join(params)}), got {len(node.args)}")
        env = {**builtins.__dict__, **fn.__globals__}
        scope = Scope(env, self.scope.buffers, self.scope.params, [],
                      dict(zip(params, (self.value(a) for a in node.args))))
        inner = ExprParser(scope, self.fail)
        inner.depth = self.depth + 1
        for assign in body[:-1]:
            scope.aliases[assign.targets[0].id] = inner.value(assign.value)
        return inner.value(body[-1].value)

    def _cast(self, node: ast.Call, dtype: str) -> Expr:
        if len(node.args) != 1 or node.keywords:
            raise self.fail(node, "float()/int() take one argument")
        return cast(as_dtype(dtype), self.value(node.args[0]))

    # buffers -----------------------------------------------------------------------------------
    def element(self, node: ast.Subscript) -> tuple[Buffer, list[Expr]]:
        """The buffer and index expressions of ``A[i, j]`` (also ``A[i][j]``)."""
        parts: list[ast.expr] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Subscript):
            sl = cur.slice
            parts[:0] = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
            cur = cur.value
        if not isinstance(cur, ast.Name) or cur.id not in self.scope.buffers:
            raise self.fail(node, f"'{ast.unparse(cur)}' is not a buffer (an argument annotated "
                                  "pl.Buffer[...] or a pl.alloc temporary)")
        buf = self.scope.buffers[cur.id]
        for p in parts:
            if isinstance(p, ast.Slice):
                raise self.fail(node, f"slices are not supported; index '{buf.name}' element by "
                                      "element inside loops")
        if len(parts) != buf.ndim:
            raise self.fail(node, f"buffer '{buf.name}' has {buf.ndim} dimensions, indexed with "
                                  f"{len(parts)}")
        idx = [self.value(p) for p in parts]
        for p, e in zip(parts, idx):
            if not e.dtype.is_int:
                raise self.fail(p, f"index {ast.unparse(p)} of '{buf.name}' is {e.dtype}; "
                                   "indices must be integers")
        return buf, idx

    def _shape_lookup(self, node: ast.Subscript) -> Expr | None:
        """``A.shape[k]``: the size expression of a buffer's dimension."""
        v = node.value
        if not (isinstance(v, ast.Attribute) and v.attr == "shape"
                and isinstance(v.value, ast.Name) and v.value.id in self.scope.buffers):
            return None
        buf = self.scope.buffers[v.value.id]
        k = node.slice
        if not (isinstance(k, ast.Constant) and isinstance(k.value, int)
                and 0 <= k.value < buf.ndim):
            raise self.fail(node, f"{ast.unparse(node)}: index the shape of '{buf.name}' with a "
                                  f"constant in [0, {buf.ndim})")
        return buf.shape[k.value]

    def resolve(self, node: ast.expr) -> Any:
        """The Python object a (dotted) name refers to in the function's module."""
        if isinstance(node, ast.Name):
            if node.id in self.scope.loops or node.id in self.scope.buffers:
                raise self.fail(node, f"'{node.id}' is not a function")
            if node.id not in self.scope.env:
                raise self.fail(node, f"unknown function '{node.id}'")
            return self.scope.env[node.id]
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise self.fail(node, f"'{ast.unparse(node)}' does not exist") from None
        raise self.fail(node, f"cannot call {ast.unparse(node)}")

    # affine text for isl -------------------------------------------------------------------------
    def affine(self, node: ast.expr, what: str) -> str:
        e = self.value(node)
        if not e.dtype.is_int:
            raise self.fail(node, f"{what} must be an integer, got {e.dtype} {ast.unparse(node)}")
        try:
            return expr_to_isl(e)
        except NotAffine:
            raise self.fail(node, f"{what} must be affine in loop variables and sizes (like "
                                  f"2*i + n - 1), got {ast.unparse(node)}") from None

    def condition(self, node: ast.expr) -> str:
        """isl text of an affine ``if`` condition."""
        if isinstance(node, ast.BoolOp):
            word = " and " if isinstance(node.op, ast.And) else " or "
            return "(" + word.join(self.condition(v) for v in node.values) + ")"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return f"(not {self.condition(node.operand)})"
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return "(0 = 0)" if node.value else "(0 = 1)"
        if not isinstance(node, ast.Compare):
            raise self.fail(node, f"if conditions compare loop variables and sizes (i < n, k == 0, "
                                  f"and/or/not); got {ast.unparse(node)}")
        ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "=",
               ast.NotEq: "!="}
        terms = []
        left = self.affine_cond(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            if type(op) not in ops:
                raise self.fail(node, f"comparison {type(op).__name__} is not supported in an if")
            right = self.affine_cond(right_node)
            terms.append(f"{left} {ops[type(op)]} {right}")
            left = right
        return "(" + " and ".join(terms) + ")"

    def affine_cond(self, node: ast.expr) -> str:
        e = self.value(node)
        try:
            return expr_to_isl(e)
        except NotAffine:
            raise self.fail(node, "if conditions must be affine in loop variables and sizes; "
                                  f"'{ast.unparse(node)}' is not (for a data-dependent choice "
                                  "use pl.where(cond, a, b) or max/min)") from None




def _describe(node: ast.AST) -> str:
    names = {"List": "a list", "Tuple": "a tuple", "Dict": "a dict", "Lambda": "a lambda",
             "ListComp": "a list comprehension", "Attribute": "an attribute",
             "Starred": "a starred expression", "JoinedStr": "an f-string",
             "NamedExpr": "':='"}
    return names.get(type(node).__name__, type(node).__name__)
