# SPDX-License-Identifier: Apache-2.0
"""The statements of a ``@pl.script`` function (loops, ifs, assignments, asserts), parsed into
the statements, domains and nesting of a Program."""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParseError
from ..ir.dtypes import DType
from ..ir.expr import (BinOp, BinOpKind, Expr, Load, ReduceKind, Var, VarKind, binop, cast, const,
                       same, walk)
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..poly.isl_util import params_prefix
from ..poly.order import exposed_reads
from .kernel_program import privatized
from .script_expr import ISL_RESERVED, ExprParser, Scope
from .script_signature import Declarations, alloc


class StatementParser:
    """The statements of one function, parsed in order; ``fail`` gives the errors their file,
    line and source text."""
    def __init__(self, filename: str, first_line: int, lines: list[str], env: dict[str, Any]):
        self.filename, self.first_line, self.lines = filename, first_line, lines
        self.scope = Scope(env)
        self.exprs = ExprParser(self.scope, self.fail)
        self.decl = Declarations(self.scope, self.fail)
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
        self.decl.signature(fdef)
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
        if var in self.scope.loops or var in self.scope.aliases or var in self.scope.buffers \
                or var in self.scope.params:
            raise self.fail(st, f"loop variable '{var}' is already a loop variable, buffer or size")
        if var in ISL_RESERVED:
            raise self.fail(st, f"'{var}' cannot name a loop variable (reserved in isl)")
        loop = self._range(st.iter, var)
        self.where[-1] += 1
        self.scope.loops.append(loop.iterator)
        if loop.value is not None:
            self.scope.aliases[var] = loop.value
        self.where.append(0)
        self.bounds.extend(loop.constraints)
        self._block(st.body)
        del self.bounds[-len(loop.constraints):]
        self.where.pop()
        self.scope.aliases.pop(var, None)
        self.scope.loops.pop()

    def _range(self, node: ast.expr, var: str) -> _Loop:
        """The iterator and domain constraints of ``range(...)``. A loop with a negative step
        counts its iterations upwards (iterator ``{var}_down``) and ``var`` stands for
        ``start + step * count`` in the body, so every iterator of a domain increases."""
        if not (isinstance(node, ast.Call) and self.exprs.resolve(node.func) is builtins.range):
            raise self.fail(node, "loops run over range(...): for i in range(lo, hi)")
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise self.fail(node, "range() takes 1 to 3 positional arguments")
        args = node.args
        step = self._step(args[2]) if len(args) == 3 else 1
        if len(args) == 1:
            lo, hi = "0", self.exprs.affine(args[0], "a loop bound")
        else:
            lo, hi = (self.exprs.affine(a, "a loop bound") for a in args[:2])
        if step > 0:
            cons = [f"{lo} <= {var} < {hi}"]
            if step != 1:
                cons.append(f"({var} - ({lo})) mod {step} = 0")
            return _Loop(var, cons, None)
        count = self._fresh(f"{var}_down")
        start = self.exprs.value(args[0])
        value = start - const(-step) * Var(count, VarKind.ITER) if step != -1 \
            else start - Var(count, VarKind.ITER)
        stride = count if step == -1 else f"{-step}*{count}"
        return _Loop(count, [f"{count} >= 0", f"{lo} - {stride} > {hi}"], value)

    def _step(self, node: ast.expr) -> int:
        v = node
        sign = 1
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
            v, sign = v.operand, -1
        if not (isinstance(v, ast.Constant) and isinstance(v.value, int)
                and not isinstance(v.value, bool) and v.value != 0):
            raise self.fail(node, "the step of range() must be a non-zero integer constant "
                                  "(range(a, b, 2), range(n - 1, -1, -1))")
        return sign * v.value

    def _fresh(self, base: str) -> str:
        taken = set(self.scope.loops) | set(self.scope.buffers) | set(self.scope.params) \
            | set(self.scope.aliases) | set(self.scope.env)
        name, k = base, 1
        while name in taken:
            name, k = f"{base}{k}", k + 1
        return name

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
        first = st.targets[0]
        if len(st.targets) == 1 and isinstance(first, ast.Name) and self._is_alloc(st.value):
            self._alloc(first, st.value)
            return
        value = self.exprs.value(st.value)
        written: set[str] = set()
        for target in st.targets:
            # a = b = x: x is computed once; re-reading it for b is the same value unless an
            # earlier target of the chain changed something x reads
            if written & {ld.buffer for ld in walk(value) if isinstance(ld, Load)}:
                raise self.fail(st, "in this chained assignment the value reads "
                                    f"{', '.join(sorted(written))}, which an earlier target "
                                    "changes; write the assignments one by one")
            buf, idx = self._target(target, value)
            self._emit(buf, idx, value)
            written.add(buf.name)

    def _target(self, target: ast.expr, value: Expr | None) -> tuple[Buffer, list[Expr]]:
        """The buffer element an assignment writes: ``A[i, j]`` or a scalar variable (a new
        one takes the dtype of its first value)."""
        if isinstance(target, ast.Subscript):
            return self.exprs.element(target)
        if not isinstance(target, ast.Name):
            raise self.fail(target, "assign to a buffer element (A[i, j] = ...) or a scalar "
                                    "variable (x = ...)")
        name = target.id
        if name in self.scope.scalars:
            buf = self.scope.buffers[name]
            if buf.role is not BufferRole.TEMP:
                raise self.fail(target, f"'{name}' is an argument (a value passed in); assign "
                                        "to a new local variable instead")
            return buf, []
        if value is None or name in self.scope.buffers or name in self.scope.params \
                or name in self.scope.loops or name in self.scope.aliases:
            what = "defined" if value is None else "a buffer, size or loop variable"
            raise self.fail(target, f"'{name}' is not {what}" if value is None else
                            f"'{name}' is {what}; a scalar variable needs a new name")
        if name in ISL_RESERVED:
            raise self.fail(target, f"'{name}' cannot name a variable (reserved in isl)")
        buf = Buffer(name, (), self._scalar_dtype(value), BufferRole.TEMP, MemScope.LOCAL)
        self.decl.add_buffer(target, buf)
        self.scope.scalars[name] = True
        return buf, []

    def _AugAssign(self, st: ast.AugAssign) -> None:
        if isinstance(st.target, ast.Name) and st.target.id not in self.scope.scalars:
            raise self.fail(st, f"'{st.target.id}' is not a scalar variable of this function; "
                                f"assign it first ({st.target.id} = 0.0) or update a buffer "
                                "element")
        buf, idx = self._target(st.target, None)
        value = self.exprs.value(st.value)
        current = buf[tuple(idx)]
        if isinstance(st.op, (ast.Add, ast.Sub)):
            rhs = value if isinstance(st.op, ast.Add) else -value
            self._emit(buf, idx, current + rhs)
            return
        if isinstance(st.op, ast.Pow):
            self._emit(buf, idx, self.exprs.power(st, current, st.value))
            return
        ops = {ast.Mult: BinOpKind.MUL, ast.Div: BinOpKind.DIV, ast.FloorDiv: BinOpKind.FLOORDIV,
               ast.Mod: BinOpKind.MOD}
        if type(st.op) not in ops:
            raise self.fail(st, f"operator {type(st.op).__name__}= is not supported")
        self._emit(buf, idx, binop(ops[type(st.op)], current, value))

    def _is_alloc(self, value: ast.expr) -> bool:
        if not isinstance(value, ast.Call):
            return False
        try:
            fn = self.exprs.resolve(value.func)
        except ParseError:
            return False
        return fn is alloc or fn is np.empty

    @property
    def float_dtype(self) -> DType:
        """The float dtype of the function's buffers when they agree (a float64 kernel's
        temporaries are float64), else float32."""
        floats = {b.dtype for b in self.scope.buffers.values() if b.dtype.is_float}
        return floats.pop() if len(floats) == 1 else DType.FLOAT32

    def _scalar_dtype(self, value: Expr) -> DType:
        """The dtype of a scalar variable first assigned ``value``. A Python number takes the
        type of the kernel's data, as PolyBench declares ``temp2`` of the kernel's type: the
        buffers' float dtype when they agree (float64 when they do not, or for a float in an
        integer kernel); in a kernel of integer buffers an integer takes their dtype."""
        if not value.weak or value.dtype is DType.BOOL:
            return value.dtype
        dtypes = {b.dtype for b in self.scope.buffers.values() if b.dtype is not DType.BOOL}
        floats = {d for d in dtypes if d.is_float}
        if len(floats) == 1:
            return floats.pop()
        if value.dtype.is_int and dtypes and not floats:
            return dtypes.pop() if len(dtypes) == 1 else DType.INT64
        return DType.FLOAT64

    def _alloc(self, target: ast.Name, value: ast.Call) -> None:
        if self.scope.loops:
            raise self.fail(target, "allocate temporaries at the top of the function, outside "
                                    "loops")
        args = list(value.args)
        kw = {k.arg: k.value for k in value.keywords}
        if not args or len(args) > 2 or set(kw) - {"dtype"} or (len(args) == 2 and kw):
            raise self.fail(value, "allocate as pl.alloc(shape, dtype), e.g. "
                                   f'pl.alloc((n,), "{self.float_dtype}")')
        dnode = args[1] if len(args) == 2 else kw.get("dtype")
        shape = self.decl.literal(value, args[0])
        # without a dtype, the kernel's own float type: a float64 kernel keeps its precision
        dtype = self.decl.literal(value, dnode) if dnode is not None else self.float_dtype
        buf = Buffer(target.id, self.decl.shape(value, shape), self.decl.dtype(value, dtype),
                     BufferRole.TEMP)
        self.decl.add_buffer(target, buf)

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
        draft = Program(name, bufs, stmts, params, tuple(self.decl.args),
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
        # scalar variables get one element per iteration of the loops that exchange no value
        # through them, so that those loops stay free to run in parallel
        return privatized(Program(name, tuple(final), stmts, params, tuple(self.decl.args), assumed,
                                  nesting=tuple(self.nesting)))


@dataclass(frozen=True, slots=True)
class _Loop:
    """A loop of the function: its iterator, domain constraints, and the value the loop
    variable stands for when it is not the iterator itself (a downward loop)."""
    iterator: str
    constraints: list[str]
    value: Expr | None


def _reduction(buf: Buffer, idx: list[Expr], value: Expr) -> tuple[ReduceKind | None, Expr]:
    """``X = X + e``, ``X = X * e`` and ``X = max(X, e)`` (e not reading X) are reduction
    updates."""
    if not isinstance(value, BinOp):
        return None, value
    kinds = {BinOpKind.ADD: ReduceKind.SUM, BinOpKind.MAX: ReduceKind.MAX,
             BinOpKind.MIN: ReduceKind.MIN, BinOpKind.MUL: ReduceKind.PROD}
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
