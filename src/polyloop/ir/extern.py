# SPDX-License-Identifier: Apache-2.0
"""Calls of C functions the user provides (``pl.extern``): a scalar function of scalar
arguments, declared by its header and, optionally, defined by C source given with it.

The function must be pure (its value depends only on its arguments, and it writes no memory
the kernel sees): dependences are computed from its arguments only. The C text given as
``source`` or named as ``header`` is the user's own code and goes into the module as written;
the function name and header name are checked to be a C identifier and a file name.

>>> import polyloop as pl
>>> clamp01 = pl.extern("clamp01", dtype="float64", args=["float64"],
...                     source="static double clamp01(double x) { return x < 0 ? 0 : x > 1 ? 1 : x; }",
...                     python=lambda x: min(max(x, 0.0), 1.0))
>>> A = pl.placeholder((4,), "float64", name="A")
>>> str(pl.compute((4,), lambda i: clamp01(A[i] * 2.0), name="B").body)
'clamp01(A[i] * 2.0)'
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import PolyloopError
from .dtypes import DType, as_dtype
from .expr import Expr, ExprLike, Unary, UnaryKind, _node, as_expr, cast

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_HEADER = re.compile(r"(<[A-Za-z0-9_./+-]+>|[A-Za-z0-9_./+-]+)\Z")


@dataclass(frozen=True, slots=True)
class ExternFunction:
    """A C function ``dtype name(arg_dtypes...)``: where it is declared and how the reference
    interpreter computes it."""
    name: str
    dtype: DType
    arg_dtypes: tuple[DType, ...]
    header: str = ""          # "<mylib.h>" (a system header) or "path/mylib.h"
    source: str = ""          # C text defining the function, emitted once per module
    python: Callable[..., Any] | None = field(default=None, compare=False)

    def __reduce__(self) -> tuple:
        # pickled without ``python`` (a lambda or a function of the main script does not load
        # in another process, e.g. a tuning worker, which only compiles the C function)
        return (ExternFunction, (self.name, self.dtype, self.arg_dtypes, self.header,
                                 self.source))

    def include_line(self) -> str:
        if not self.header:
            return ""
        return f"#include {self.header}" if self.header.startswith("<") else \
            f'#include "{self.header}"'


@_node
class Extern(Expr):
    """A call of an extern function on scalar arguments."""
    function: ExternFunction
    args: tuple[Expr, ...]
    dtype: DType
    weak: bool = False

    def render_text(self, text: Callable[[Expr], str]) -> str:
        """The call as printed by ``expr_to_str`` (which renders the arguments)."""
        return f"{self.function.name}({', '.join(text(a) for a in self.args)})"


# The functions of C's math library (declared by <math.h>) that compute one of polyloop's
# operators: ``expf`` on a float32 is ``exp`` on it (the float64 functions have no suffix).
MATH_LIBRARY_OPERATORS = {"exp": UnaryKind.EXP, "log": UnaryKind.LOG, "sqrt": UnaryKind.SQRT,
                          "sin": UnaryKind.SIN, "cos": UnaryKind.COS, "tan": UnaryKind.TAN,
                          "tanh": UnaryKind.TANH, "erf": UnaryKind.ERF, "fabs": UnaryKind.ABS,
                          "floor": UnaryKind.FLOOR, "ceil": UnaryKind.CEIL,
                          "rint": UnaryKind.ROUND}
_SUFFIX = {DType.FLOAT32: "f", DType.FLOAT64: ""}


def as_operator(e: Expr) -> Unary | None:
    """The operator a call of C's math library computes (``expf(x)`` on a float32 ``x`` is
    ``exp(x)``), or None for any other call: a function given with source, declared by another
    header, or taking other types. Code generation uses it to give such a call the operator's
    vector form.

    >>> import polyloop as pl
    >>> expf = pl.extern("expf", dtype="float32", args=["float32"], header="<math.h>")
    >>> x = pl.placeholder((4,), "float32", name="x")
    >>> str(as_operator(expf(x[0])))
    'exp(x[0])'
    >>> as_operator(pl.extern("expf", dtype="float32", args=["float32"], header="my.h")(x[0]))
    """
    if not isinstance(e, Extern) or len(e.args) != 1:
        return None
    fn = e.function
    suffix = _SUFFIX.get(fn.dtype)
    if fn.header != "<math.h>" or fn.source or suffix is None or fn.arg_dtypes != (fn.dtype,) \
            or not fn.name.endswith(suffix):
        return None
    op = MATH_LIBRARY_OPERATORS.get(fn.name[:len(fn.name) - len(suffix)] if suffix else fn.name)
    return None if op is None else Unary(op, e.args[0], fn.dtype)


def extern(name: str, *, dtype: object, args: Sequence[object] = (), header: str = "",
           source: str = "", python: Callable[..., Any] | None = None
           ) -> Callable[..., Extern]:
    """Declare the C function ``name`` (see the module docstring); calling the result on
    expressions gives a call node: ``f = pl.extern("f", dtype="float32", args=["float32"],
    header="mylib.h")`` then ``pl.compute((n,), lambda i: f(A[i]))``.

    >>> import polyloop as pl
    >>> fma = pl.extern("fmaf", dtype="float32", args=["float32", "float32", "float32"],
    ...                 header="<math.h>")
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> str(pl.compute((4,), lambda i: fma(A[i], A[i], 1.0), name="B").body)
    'fmaf(A[i], A[i], 1.0)'
    >>> pl.extern("f(x)", dtype="float32", header="<math.h>")
    Traceback (most recent call last):
    polyloop.errors.PolyloopError: pl.extern: 'f(x)' is not a C identifier; ...
    """
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise PolyloopError(f"pl.extern: {name!r} is not a C identifier; name the function as C "
                            "declares it")
    if header and not header.startswith("<") and os.path.isfile(header):
        header = os.path.abspath(header)     # the compiler runs elsewhere
    if header and not _HEADER.match(header):
        raise PolyloopError(f"pl.extern('{name}'): header {header!r} is not a file name; give "
                            "'mylib.h', 'dir/mylib.h' or '<mylib.h>'")
    if not header and not source:
        raise PolyloopError(f"pl.extern('{name}') needs header= (where it is declared) or "
                            "source= (its C definition)")
    fn = ExternFunction(name, as_dtype(dtype), tuple(as_dtype(a) for a in args), header, source,
                        python)

    def call(*values: ExprLike) -> Extern:
        if len(values) != len(fn.arg_dtypes):
            raise PolyloopError(f"extern '{name}' takes {len(fn.arg_dtypes)} arguments "
                                f"({', '.join(map(str, fn.arg_dtypes))}), got {len(values)}")
        exprs = tuple(v if (v := as_expr(x)).dtype is d else cast(d, v)
                      for x, d in zip(values, fn.arg_dtypes))
        return Extern(fn, exprs, fn.dtype)
    call.__name__ = name
    call.extern_function = fn  # type: ignore[attr-defined]  # how @pl.script recognizes it
    return call
