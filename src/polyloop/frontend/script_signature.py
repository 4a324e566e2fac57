# SPDX-License-Identifier: Apache-2.0
"""The declarations of a ``@pl.script`` function: its arguments and temporaries.

An argument is a buffer (``A: pl.Buffer[("n", "n"), "float64"]``), a size (``n: int``: a size
parameter, inferred from the arrays' shapes or passed by name) or a value (``alpha: float`` or a
NumPy scalar type: a zero-dimensional input read by its bare name). Annotations and
``pl.alloc`` arguments are read from the syntax tree (``script_values.literal``), never run.
"""
from __future__ import annotations

import ast
from typing import Any, Callable

import numpy as np

from ..errors import ParseError, PolyloopError
from ..ir.dtypes import as_dtype
from ..ir.expr import Expr, Var, VarKind, const
from ..ir.program import Buffer, BufferRole
from .script_expr import ISL_RESERVED, ExprParser, Scope
from .script_values import NotLiteral, literal


class Declarations:
    """Reads the signature and temporaries into ``scope``; ``fail`` raises a located error.

    >>> import ast
    >>> d = Declarations(Scope({"int": int, "float": float}), lambda n, m: ParseError(m))
    >>> d.signature(ast.parse("def f(n: int, alpha: float): pass").body[0])
    >>> d.args, list(d.scope.params)
    (['alpha'], ['n'])
    """

    def __init__(self, scope: Scope, fail: Callable[[ast.AST, str], ParseError]):
        self.scope = scope
        self.fail = fail
        self.args: list[str] = []       # buffer and value arguments, in order

    def signature(self, fdef: ast.FunctionDef) -> None:
        a = fdef.args
        if a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs or a.defaults:
            raise self.fail(fdef, "a script takes plain buffer arguments only (no *args, "
                                  "**kwargs, defaults or keyword-only arguments)")
        for arg in a.args:
            if arg.annotation is None:
                raise self.fail(arg, f"argument '{arg.arg}' needs an annotation like "
                                     f'{arg.arg}: pl.Buffer[("n", "n"), "float32"], '
                                     f"{arg.arg}: float or {arg.arg}: int")
            self.argument(arg, self.literal(arg, arg.annotation))

    def argument(self, arg: ast.arg, value: Any) -> None:
        """A buffer (``pl.Buffer[shape, dtype]``), a size (``int``) or a scalar value
        (``float``, ``np.float32``: a zero-dimensional input read by its name)."""
        name = arg.arg
        if value is int:
            if name in self.scope.buffers or name in ISL_RESERVED:
                raise self.fail(arg, f"'{name}' cannot name a size")
            self.scope.params.setdefault(name)
            return
        origin = getattr(value, "__origin__", None)
        spec = getattr(value, "__args__", None)
        if origin is Buffer and spec is not None and len(spec) == 2:
            shape, dtype = self.shape(arg, spec[0]), self.dtype(arg, spec[1])
            self.add_buffer(arg, Buffer(name, shape, dtype, BufferRole.INPUT))
        elif value is float or value is bool or _is_dtype(value):
            dtype = self.dtype(arg, "float64" if value is float else value)
            self.add_buffer(arg, Buffer(name, (), dtype, BufferRole.INPUT))
            self.scope.scalars[name] = True
        else:
            raise self.fail(arg, f"annotate '{name}' as pl.Buffer[shape, dtype] (e.g. "
                                 f'pl.Buffer[("n", 128), "float32"]), int (a size) or float (a '
                                 f"value); got {ast.unparse(arg.annotation)}")
        self.args.append(name)

    def literal(self, node: ast.AST, expr: ast.expr) -> Any:
        sizes = {p: Var(p, VarKind.PARAM) for p in self.scope.params}
        try:
            return literal(expr, {**self.scope.env, **sizes})
        except NotLiteral as e:
            what = f"the annotation of '{node.arg}'" if isinstance(node, ast.arg) else "it"
            raise self.fail(node, f"cannot evaluate {what}: {e}") from None

    def shape(self, node: ast.AST, shape: object) -> tuple[Expr, ...]:
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        out: list[Expr] = []
        for d in dims:
            if isinstance(d, str):
                out.append(self.size_text(node, d))
            elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0:
                out.append(const(int(d)))
            elif isinstance(d, Var) and d.kind is VarKind.PARAM:
                self.scope.params.setdefault(d.name)
                out.append(d)
            elif isinstance(d, Expr) and d.dtype.is_int:
                out.append(d)
            else:
                raise self.fail(node, f"shape entries are sizes (non-negative ints or parameter "
                                      f"names), got {d!r}")
        return tuple(out)

    def size_text(self, node: ast.AST, text: str) -> Expr:
        """A size written as text: a parameter name ("n") or an affine expression of
        parameters ("H - K + 1"); every name in it becomes a size parameter."""
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            raise self.fail(node, f"size {text!r} is not a name or an expression") from None
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                if n.id in ISL_RESERVED or n.id in self.scope.buffers:
                    raise self.fail(node, f"'{n.id}' cannot name a size")
                self.scope.params.setdefault(n.id)
        expr = ExprParser(self.scope, lambda _n, msg: self.fail(node, f"size {text!r}: {msg}"))
        value = expr.value(tree)
        expr.affine(tree, f"size {text!r}")
        return value

    def dtype(self, node: ast.AST, dtype: object) -> Any:
        try:
            return as_dtype(dtype)
        except PolyloopError as e:
            raise self.fail(node, str(e)) from None

    def add_buffer(self, node: ast.AST, buf: Buffer) -> None:
        if buf.name in self.scope.buffers or buf.name in self.scope.params:
            raise self.fail(node, f"'{buf.name}' is already a buffer or size")
        self.scope.buffers[buf.name] = buf


def _is_dtype(value: object) -> bool:
    return isinstance(value, np.dtype) or (isinstance(value, type)
                                           and issubclass(value, np.generic))


def alloc(shape: object, dtype: object = None) -> Buffer:
    """A temporary buffer inside a ``@pl.script`` function: ``Y = pl.alloc((n, 128), "float32")``.
    Without a dtype it takes the float type of the function's buffers (float32 if they have
    none or several).

    Only meaningful in a script (which is parsed, not run); calling it elsewhere is an error.

    >>> import polyloop as pl
    >>> @pl.script
    ... def twice(A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
    ...     T = pl.alloc((n,), "float32")
    ...     for i in range(n):
    ...         T[i] = A[i] + 1.0
    ...     for i in range(n):
    ...         B[i] = 2.0 * T[i]
    >>> print(twice)
    # program twice  (params: n)
    # input  A: float32[n]
    # output B: float32[n]
    # temp   T: float32[n]
    T: [n] -> { T[i] : 0 <= i < n }
        T[i] = A[i] + 1.0
    B: [n] -> { B[i] : 0 <= i < n }
        B[i] = 2.0 * T[i]
    >>> pl.alloc((4,), "float32")
    Traceback (most recent call last):
    polyloop.errors.PolyloopError: pl.alloc(shape, dtype) declares a temporary inside a ...
    """
    raise PolyloopError("pl.alloc(shape, dtype) declares a temporary inside a @pl.script "
                        "function; it cannot be called directly")
