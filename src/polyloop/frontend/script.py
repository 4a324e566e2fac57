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

Arguments are annotated ``pl.Buffer[shape, dtype]``; strings in shapes are size parameters,
usable by name in the body. The body may hold ``for ... in range(...)`` loops with affine bounds
(also in outer loop variables), imperfect nests, ``if``/``else`` on affine conditions,
assignments to buffer elements (``=``, ``+=``, ``-=``, ``*=``, ``/=``), temporaries
``Y = pl.alloc(shape, dtype)`` (or ``np.empty``), numbers, and max/min/abs/exp/log/sqrt/tanh
from ``math``, NumPy or polyloop. ``X[...] += e``, ``X[...] = X[...] + e`` and
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

import numpy as np

from ..errors import ParseError, PolyloopError, foreign_errors
from ..ir.dtypes import as_dtype
from ..ir.expr import (BinOp, BinOpKind, Expr, Load, ReduceKind, Var, VarKind, binop, cast, const,
                       same, walk)
from ..ir.program import Buffer, BufferRole, Program, Statement
from ..poly.isl_util import params_prefix
from ..poly.order import exposed_reads
from .script_expr import ISL_RESERVED, ExprParser, Scope


def alloc(shape: object, dtype: object = "float32") -> Buffer:
    """A temporary buffer inside a ``@pl.script`` function: ``Y = pl.alloc((n, 128), "float32")``.

    Only meaningful in a script (which is parsed, not run); calling it elsewhere is an error.
    """
    raise PolyloopError("pl.alloc(shape, dtype) declares a temporary inside a @pl.script "
                        "function; it cannot be called directly")


def script(fn: Callable[..., Any] | str | None = None, *, name: str | None = None
           ) -> Program | Callable[[Callable[..., Any]], Program]:
    """Parse a function of plain Python loops into a Program (see the module docstring).

    Use as ``@pl.script``, ``@pl.script(name="k")`` or ``pl.script(source_text)``.
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
    return _Parser(filename, first_line, source.splitlines(), env).parse(fdef, name)


class _Parser:
    def __init__(self, filename: str, first_line: int, lines: list[str], env: dict[str, Any]):
        self.filename, self.first_line, self.lines = filename, first_line, lines
        self.scope = Scope(env)
        self.exprs = ExprParser(self.scope, self.fail)
        self.args: list[str] = []
        self.statements: list[Statement] = []
        self.nesting: list[tuple[str, tuple[int, ...]]] = []
        self.bounds: list[str] = []          # isl constraints of the enclosing loops and ifs
        self.where: list[int] = [0]          # next position at each depth
        self.names: dict[str, int] = {}
        self.assumptions: list[str] = []

    def fail(self, node: ast.AST, message: str) -> ParseError:
        line = getattr(node, "lineno", 1)
        src = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return ParseError(f"{self.filename}:{self.first_line + line - 1}: {message}"
                          + (f"\n    {src}" if src else ""))

    # the function --------------------------------------------------------------------------------
    def parse(self, fdef: ast.FunctionDef, name: str | None) -> Program:
        self._signature(fdef)
        body = list(fdef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]     # docstring
        if body and isinstance(body[-1], ast.Return) and body[-1].value is None:
            body = body[:-1]
        self._block(body)
        if not self.statements:
            raise self.fail(fdef, f"function '{fdef.name}' assigns no buffer element")
        return self._program(name or fdef.name)

    def _signature(self, fdef: ast.FunctionDef) -> None:
        a = fdef.args
        if a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs or a.defaults:
            raise self.fail(fdef, "a script takes plain buffer arguments only (no *args, "
                                  "**kwargs, defaults or keyword-only arguments)")
        for arg in a.args:
            if arg.annotation is None:
                raise self.fail(arg, f"argument '{arg.arg}' needs an annotation like "
                                     f'{arg.arg}: pl.Buffer[("n", "n"), "float32"]')
            shape, dtype = self._annotation(arg)
            self._add_buffer(arg, Buffer(arg.arg, shape, dtype, BufferRole.INPUT))
            self.args.append(arg.arg)

    def _annotation(self, arg: ast.arg) -> tuple[tuple[Expr, ...], Any]:
        node = arg.annotation
        assert node is not None
        try:
            value = eval(compile(ast.Expression(node), self.filename, "eval"),  # noqa: S307
                         dict(self.scope.env))
        except Exception as e:  # noqa: BLE001 - any failure of the user's annotation
            raise self.fail(arg, f"cannot evaluate the annotation of '{arg.arg}': {e}") from None
        origin = getattr(value, "__origin__", None)
        spec = getattr(value, "__args__", None)
        if origin is not Buffer or spec is None or len(spec) != 2:
            raise self.fail(arg, f"annotate '{arg.arg}' as pl.Buffer[shape, dtype], e.g. "
                                 f'pl.Buffer[("n", 128), "float32"]; got {ast.unparse(node)}')
        return self._shape(arg, spec[0]), self._dtype(arg, spec[1])

    def _shape(self, node: ast.AST, shape: object) -> tuple[Expr, ...]:
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        out: list[Expr] = []
        for d in dims:
            if isinstance(d, str):
                out.append(self._size_text(node, d))
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

    def _size_text(self, node: ast.AST, text: str) -> Expr:
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

    def _dtype(self, node: ast.AST, dtype: object) -> Any:
        try:
            return as_dtype(dtype)
        except PolyloopError as e:
            raise self.fail(node, str(e)) from None

    def _add_buffer(self, node: ast.AST, buf: Buffer) -> None:
        if buf.name in self.scope.buffers or buf.name in self.scope.params:
            raise self.fail(node, f"'{buf.name}' is already a buffer or size")
        self.scope.buffers[buf.name] = buf

    # statements ------------------------------------------------------------------------------------
    def _block(self, body: list[ast.stmt]) -> None:
        for st in body:
            method = getattr(self, "_" + type(st).__name__, None)
            if method is None:
                raise self.fail(st, f"{_kind(st)} is not supported in @pl.script; write "
                                    "for-range loops, if on affine conditions and assignments "
                                    "to buffer elements")
            method(st)

    def _Pass(self, st: ast.Pass) -> None:
        return None

    def _Assert(self, st: ast.Assert) -> None:
        """``assert n >= 1``: what the caller guarantees about the sizes (isl uses it to drop
        bounds checks and to accept accesses that are in bounds only for such sizes)."""
        if self.scope.loops:
            raise self.fail(st, "assert states what holds for the sizes; put it outside loops")
        self.assumptions.append(self.exprs.condition(st.test))

    def _Expr(self, st: ast.Expr) -> None:
        if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return None     # a comment-like string
        raise self.fail(st, "an expression statement has no effect here; assign its value to a "
                            "buffer element")

    def _For(self, st: ast.For) -> None:
        if st.orelse:
            raise self.fail(st, "for ... else is not supported")
        if not isinstance(st.target, ast.Name):
            raise self.fail(st, "the loop variable must be a single name")
        var = st.target.id
        if var in self.scope.loops or var in self.scope.buffers or var in self.scope.params:
            raise self.fail(st, f"loop variable '{var}' is already a loop variable, buffer or size")
        if var in ISL_RESERVED:
            raise self.fail(st, f"'{var}' cannot name a loop variable (reserved in isl)")
        lo, hi, step = self._range(st.iter)
        cons = [f"{lo} <= {var} < {hi}"]
        if step != 1:
            cons.append(f"({var} - ({lo})) mod {step} = 0")
        self.where[-1] += 1
        self.scope.loops.append(var)
        self.where.append(0)
        self.bounds.extend(cons)
        self._block(st.body)
        del self.bounds[-len(cons):]
        self.where.pop()
        self.scope.loops.pop()

    def _range(self, node: ast.expr) -> tuple[str, str, int]:
        if not (isinstance(node, ast.Call) and self.exprs.resolve(node.func) is builtins.range):
            raise self.fail(node, "loops run over range(...): for i in range(lo, hi)")
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise self.fail(node, "range() takes 1 to 3 positional arguments")
        args = node.args
        if len(args) == 3:
            s = args[2]
            if not (isinstance(s, ast.Constant) and isinstance(s.value, int) and s.value > 0):
                raise self.fail(node, "the step of range() must be a positive integer constant; "
                                      "for a reversed loop, loop forwards and index with n - 1 - i")
            step = s.value
        else:
            step = 1
        if len(args) == 1:
            return "0", self.exprs.affine(args[0], "a loop bound"), step
        return (self.exprs.affine(args[0], "a loop bound"),
                self.exprs.affine(args[1], "a loop bound"), step)

    def _If(self, st: ast.If) -> None:
        cond = self.exprs.condition(st.test)
        self.bounds.append(cond)
        self._block(st.body)
        self.bounds.pop()
        if st.orelse:
            self.bounds.append(f"(not {cond})")
            self._block(st.orelse)
            self.bounds.pop()

    def _Assign(self, st: ast.Assign) -> None:
        if len(st.targets) != 1:
            raise self.fail(st, "chained assignment (a = b = ...) is not supported")
        target = st.targets[0]
        if isinstance(target, ast.Name):
            self._alloc(target, st.value)
            return
        if not isinstance(target, ast.Subscript):
            raise self.fail(st, "assign to a buffer element: A[i, j] = ...")
        buf, idx = self.exprs.element(target)
        value = self.exprs.value(st.value)
        self._emit(buf, idx, value)

    def _AugAssign(self, st: ast.AugAssign) -> None:
        if not isinstance(st.target, ast.Subscript):
            raise self.fail(st, "augmented assignment to a name; scalar variables are not "
                                "supported: use a buffer element (pl.alloc((1,), ...))")
        buf, idx = self.exprs.element(st.target)
        value = self.exprs.value(st.value)
        current = buf[tuple(idx)]
        if isinstance(st.op, (ast.Add, ast.Sub)):
            rhs = value if isinstance(st.op, ast.Add) else -value
            self._emit(buf, idx, current + rhs)
            return
        ops = {ast.Mult: BinOpKind.MUL, ast.Div: BinOpKind.DIV, ast.FloorDiv: BinOpKind.FLOORDIV,
               ast.Mod: BinOpKind.MOD}
        if type(st.op) not in ops:
            raise self.fail(st, f"operator {type(st.op).__name__}= is not supported")
        self._emit(buf, idx, binop(ops[type(st.op)], current, value))

    def _alloc(self, target: ast.Name, value: ast.expr) -> None:
        fn = self.exprs.resolve(value.func) if isinstance(value, ast.Call) else None
        if fn is not alloc and fn is not np.empty:
            raise self.fail(target, f"assignment to the name '{target.id}': scalar variables are "
                                    "not supported; assign to buffer elements, or allocate a "
                                    f"temporary: {target.id} = pl.alloc((n,), \"float32\")")
        if self.scope.loops:
            raise self.fail(target, "allocate temporaries at the top of the function, outside "
                                    "loops")
        assert isinstance(value, ast.Call)
        args = list(value.args)
        kw = {k.arg: k.value for k in value.keywords}
        if not args or len(args) > 2 or set(kw) - {"dtype"} or (len(args) == 2 and kw):
            raise self.fail(value, "allocate as pl.alloc(shape, dtype)")
        dnode = args[1] if len(args) == 2 else kw.get("dtype")
        shape = self._const_eval(args[0])
        dtype = self._const_eval(dnode) if dnode is not None else "float32"
        buf = Buffer(target.id, self._shape(value, shape), self._dtype(value, dtype),
                     BufferRole.TEMP)
        self._add_buffer(target, buf)

    def _const_eval(self, node: ast.expr) -> Any:
        try:
            return eval(compile(ast.Expression(node), self.filename, "eval"),  # noqa: S307
                        dict(self.scope.env))
        except Exception as e:  # noqa: BLE001
            raise self.fail(node, f"cannot evaluate {ast.unparse(node)}: {e}") from None

    # building statements ---------------------------------------------------------------------------
    def _emit(self, buf: Buffer, idx: list[Expr], value: Expr) -> None:
        kind, value = _reduction(buf, idx, value)
        if value.dtype is not buf.dtype:
            value = cast(buf.dtype, value)
        k = self.names.get(buf.name, 0)
        self.names[buf.name] = k + 1
        name = buf.name if k == 0 else f"{buf.name}_{k}"
        iters = tuple(self.scope.loops)
        dom = (f"{{ {name}[{', '.join(iters)}] : "
               f"{' and '.join(self.bounds) if self.bounds else '0 = 0'} }}")
        position = tuple(self._loop_positions()) + (self.where[-1],)
        self.where[-1] += 1
        self.statements.append(Statement(name, iters, dom, buf.name, tuple(idx), value, kind))
        self.nesting.append((name, position))

    def _loop_positions(self) -> list[int]:
        # where[d] was advanced past loop d when it was entered
        return [w - 1 for w in self.where[:-1]]

    def _program(self, name: str) -> Program:
        params = tuple(self.scope.params)
        pre = params_prefix(params)
        stmts = tuple(Statement(s.name, s.iters, pre + s.domain, s.buffer, s.indices, s.value,
                                s.reduction) for s in self.statements)
        bufs = tuple(self.scope.buffers.values())
        draft = Program(name, bufs, stmts, params, tuple(self.args),
                        nesting=tuple(self.nesting))
        written = {s.buffer for s in stmts}
        read = {ld.buffer for s in stmts for ld in s.reads()}
        final = []
        for b in bufs:
            role = b.role
            if role is not BufferRole.TEMP and b.name in written:
                exposed = b.name in read and exposed_reads(draft, b.name)
                role = BufferRole.INOUT if exposed else BufferRole.OUTPUT
            final.append(Buffer(b.name, b.shape, b.dtype, role, b.scope))
        assumed = f"{pre}{{ : {' and '.join(self.assumptions)} }}" if self.assumptions else ""
        return Program(name, tuple(final), stmts, params, tuple(self.args), assumed,
                       nesting=tuple(self.nesting))


def _reduction(buf: Buffer, idx: list[Expr], value: Expr) -> tuple[ReduceKind | None, Expr]:
    """``X = X + e`` and ``X = max(X, e)`` (e not reading X) are reduction updates."""
    if not isinstance(value, BinOp):
        return None, value
    kinds = {BinOpKind.ADD: ReduceKind.SUM, BinOpKind.MAX: ReduceKind.MAX,
             BinOpKind.MIN: ReduceKind.MIN}
    kind = kinds.get(value.op)
    if kind is None:
        return None, value
    target = Load(buf.name, tuple(idx), buf.dtype)
    for acc, rest in ((value.lhs, value.rhs), (value.rhs, value.lhs)):
        if _is_target(acc, target) and not any(
                isinstance(n, Load) and n.buffer == buf.name for n in walk(rest)):
            return kind, rest
    return None, value


def _is_target(e: Expr, target: Load) -> bool:
    return isinstance(e, Load) and same(e, target)


def _kind(st: ast.stmt) -> str:
    names = {"While": "a while loop", "With": "a with block", "Try": "try/except",
             "Break": "break", "Continue": "continue", "Return": "return",
             "FunctionDef": "a nested function", "Import": "import", "ImportFrom": "import",
             "Global": "global", "Nonlocal": "nonlocal", "Raise": "raise", "Assert": "assert",
             "Delete": "del", "AnnAssign": "an annotated assignment", "ClassDef": "a class"}
    return names.get(type(st).__name__, type(st).__name__)
