# SPDX-License-Identifier: Apache-2.0
"""``@pl.script``: a Python function of plain loops, parsed (never run) into a Program.

>>> import polyloop as pl          # in a file or a notebook cell (the source is read)
>>> @pl.script
... def stencil(A: pl.Buffer[("n", "n"), "float64"]):
...     for i in range(1, n):
...         for j in range(1, n):
...             A[i, j] = A[i - 1, j] + A[i, j - 1]
>>> print(stencil.statements[0].domain)
[n] -> { A[i, j] : 1 <= i < n and 1 <= j < n }

Arguments are annotated ``pl.Buffer[shape, dtype]`` (strings in shapes are size parameters,
usable by name in the body), ``int`` (a size) or ``float`` (a value). The body may hold
``for ... in range(...)`` loops with affine bounds (also in outer loop variables, with any
constant step, downward ones included), imperfect nests, ``if``/``else`` on affine conditions,
assignments (also chained) to buffer elements and to scalar variables (``=``, ``+=``, ``-=``,
``*=``, ``/=``, ``**=``), temporaries ``Y = pl.alloc(shape, dtype)`` (or ``np.empty``), numbers,
``**``/pow, max/min/abs/exp/log/sqrt/tanh from ``math``, NumPy or polyloop, and calls of small
helper functions of the module (inlined). A scalar variable is a zero-dimensional temporary
with exact dependences; it gets one element per iteration of the loops around it that pass no
value through it, which keeps those loops parallel. ``X[...] += e``, ``X[...] = X[...] + e`` and
``X[...] = max(X[...], e)`` are reductions (their updates may be reordered); ``assert n >= 1``
states what the caller guarantees about the sizes (``Program.assumptions``). Anything else
raises ``pl.ParseError`` naming the file and line. Statements keep the program order of the
loops as written (``Program.nesting``).
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from typing import Any, Callable

from ..errors import ParseError, PolyloopError, foreign_errors
from ..ir.program import Program
from ..poly.isl_util import isl_name
from .script_signature import alloc
from .script_statements import StatementParser

__all__ = ["alloc", "script"]


def script(fn: Callable[..., Any] | str | None = None, *, name: str | None = None
           ) -> Program | Callable[[Callable[..., Any]], Program]:
    """Parse a function of plain Python loops into a Program (see the module docstring).

    Use as ``@pl.script``, ``@pl.script(name="k")`` or ``pl.script(source_text)``.

    >>> import polyloop as pl
    >>> @pl.script
    ... def scale(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"], a: float):
    ...     for i in range(n):
    ...         B[i] = a * A[i]
    >>> scale.args, scale.params
    (('A', 'B', 'a'), ('n',))
    >>> tri = pl.script('''
    ... def tri(L: pl.Buffer[("n", "n"), "float64"]):
    ...     for i in range(n):
    ...         for j in range(i + 1):
    ...             L[i, j] = 0.0
    ... ''')
    >>> print(tri.statements[0].domain)
    [n] -> { L[i, j] : 0 <= i < n and 0 <= j < (i + 1) }
    """
    if fn is None:
        return lambda f: script(f, name=name)  # type: ignore[return-value]
    if isinstance(fn, str):     # names mean what they mean where pl.script(text) is called
        caller = inspect.currentframe().f_back  # type: ignore[union-attr]
        env = {**builtins.__dict__, **(caller.f_globals if caller is not None else {})}
        return _parse_source(fn, "<script>", 1, env, name)
    if not callable(fn):
        raise PolyloopError(f"pl.script takes a function or its source text, got {fn!r}")
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError):
        raise PolyloopError(f"pl.script cannot read the source of {fn!r}; define it in a file "
                            "or pass the source text: pl.script(text)") from None
    env = dict(builtins.__dict__)
    env.update(fn.__globals__)  # type: ignore[attr-defined]
    env.update(inspect.getclosurevars(fn).nonlocals)
    return _parse_source("".join(lines), filename, first, env, name)


@foreign_errors("pl.script")
def _parse_source(text: str, filename: str, first_line: int, env: dict[str, Any],
                  name: str | None) -> Program:
    source = textwrap.dedent(text)
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ParseError(f"{filename}:{first_line + (e.lineno or 1) - 1}: {e.msg}") from None
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if fdef is None:
        raise ParseError(f"{filename}:{first_line}: pl.script needs a function definition")
    fdef = _AsciiNames(env).visit(fdef)
    return StatementParser(filename, first_line, source.splitlines(), env).parse(fdef, name)


class _AsciiNames(ast.NodeTransformer):
    """Python names outside ASCII (``Ä``, ``größe``) respelled as isl and C read them
    (``isl_name``: ``_c4_``, ``gr_f6__df_e``), in the function's variables, arguments and the
    size names of its annotations; names the caller's module defines are kept."""

    def __init__(self, env: dict[str, Any]):
        self.env = env

    def _spell(self, name: str) -> str:
        return name if name.isascii() or name in self.env else isl_name(name)

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self._spell(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self._spell(node.arg)
        self.generic_visit(node)
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        if isinstance(node.value, str) and node.value.isidentifier():   # a size name
            node.value = self._spell(node.value)
        return node
