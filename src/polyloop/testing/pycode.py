# SPDX-License-Identifier: Apache-2.0
"""Compile one statement into a Python function that runs it over a list of points.

Values are NumPy scalars so that arithmetic matches the generated C: float32 stays float32,
int32 wraps, ``//`` and ``%`` floor. Index arithmetic on iterators and size parameters uses
Python ints (exact, and fast to index with). Every load and store is bounds-checked, and a
``where`` evaluates only the branch it selects, as C's ``?:`` does.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import PolyloopError
from ..ir.dtypes import DType
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Reduce, ReduceKind, Select,
                       Unary, UnaryKind, Var, VarKind)
from ..ir.extern import Extern
from ..ir.program import Statement

StatementFunction = Callable[..., None]

_ARITHMETIC = {BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.DIV: "/",
               BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
               BinOpKind.EQ: "==", BinOpKind.NE: "!=", BinOpKind.AND: "and",
               BinOpKind.OR: "or"}
_MATH = {UnaryKind.EXP: "np_exp", UnaryKind.LOG: "np_log", UnaryKind.SQRT: "np_sqrt",
         UnaryKind.TANH: "np_tanh", UnaryKind.FLOOR: "np_floor", UnaryKind.CEIL: "np_ceil",
         UnaryKind.ROUND: "np_rint", UnaryKind.SIN: "np_sin", UnaryKind.COS: "np_cos",
         UnaryKind.TAN: "np_tan", UnaryKind.ERF: "math_erf", UnaryKind.ISNAN: "np_isnan"}
_CASTS = {d: f"to_{d.value}" for d in DType if d is not DType.BOOL}


def _wrapping(np_type: type, bits: int, *, signed: bool = True) -> Callable[[object], object]:
    """C's conversion to a fixed-width integer: floats truncate, integers wrap around."""
    half, mask = (1 << (bits - 1) if signed else 0), (1 << bits) - 1

    def convert(x: object) -> object:
        if isinstance(x, np.generic):
            return x.astype(np_type)
        return np_type(((int(x) + half) & mask) - half)  # type: ignore[call-overload]
    return convert


def _floordiv(a: object, b: object) -> object:
    """Integer floor division; 0 for a zero divisor, as NumPy and the generated C give."""
    return a * 0 if b == 0 else a // b  # type: ignore[operator]


def _mod(a: object, b: object) -> object:
    return a * 0 if b == 0 else a % b  # type: ignore[operator]


def _erf(x: object) -> object:
    """The error function (NumPy has none), in the dtype of ``x``."""
    value = math.erf(x)  # type: ignore[arg-type]
    return type(x)(value) if isinstance(x, np.generic) else value


_RUNTIME: dict[str, object] = {
    "np_exp": np.exp, "np_log": np.log, "np_sqrt": np.sqrt, "np_tanh": np.tanh,
    "np_floor": np.floor, "np_ceil": np.ceil, "np_rint": np.rint, "np_sin": np.sin,
    "np_cos": np.cos, "np_tan": np.tan, "np_isnan": np.isnan, "math_erf": _erf,
    "np_power": np.power, "np_fmod": np.fmod, "to_float32": np.float32, "to_float64": np.float64,
    "to_int32": _wrapping(np.int32, 32), "to_int64": _wrapping(np.int64, 64),
    "to_int8": _wrapping(np.int8, 8), "to_int16": _wrapping(np.int16, 16),
    "to_uint8": _wrapping(np.uint8, 8, signed=False), "to_float16": np.float16,
    "to_bfloat16": lambda x: DType.BFLOAT16.numpy.type(x),
    "int_floordiv": _floordiv, "int_mod": _mod,
}


@dataclass(frozen=True, slots=True)
class BufferSlot:
    """A buffer as the compiled statement sees it: its argument name and concrete shape."""
    name: str
    local: str
    shape: tuple[int, ...]


class OutOfBounds:
    """Raises the error for an access outside a buffer, with the statement and point."""

    def __init__(self, stmt: Statement) -> None:
        self.stmt = stmt

    def __call__(self, verb: str, buffer: str, shape: tuple[int, ...],
                 index: tuple[object, ...], point: tuple[int, ...]) -> None:
        where = ", ".join(f"{n}={v}" for n, v in zip(self.stmt.iters, point))
        idx = ", ".join(str(int(v)) for v in index)  # type: ignore[call-overload]
        raise PolyloopError(
            f"statement '{self.stmt.name}' at ({where}) {verb} {buffer}[{idx}], outside its "
            f"shape {shape}; check the indices and the domain {self.stmt.domain}")


def compile_statement(stmt: Statement, buffers: dict[str, BufferSlot],
                      params: dict[str, int]) -> StatementFunction:
    """A function ``run(points, *arrays)`` executing ``stmt`` at each point, in order.

    ``arrays`` are the buffers of ``buffers`` in its order (their ``local`` names).
    """
    writer = _StatementWriter(stmt, buffers, params)
    source = writer.source()
    namespace = dict(_RUNTIME, oob=OutOfBounds(stmt), **writer.constants)
    exec(compile(source, f"<statement {stmt.name}>", "exec"), namespace)
    return namespace["run"]  # type: ignore[return-value]


class _StatementWriter:
    def __init__(self, stmt: Statement, buffers: dict[str, BufferSlot],
                 params: dict[str, int]) -> None:
        self.stmt = stmt
        self.buffers = buffers
        self.params = params
        self.iters = {name: f"i_{k}" for k, name in enumerate(stmt.iters)}
        self.constants: dict[str, object] = {}
        self._temps = itertools.count()

    def source(self) -> str:
        s = self.stmt
        point = "".join(v + ", " for v in self.iters.values())
        target = self._slot(s.buffer)
        store = [self._temp() for _ in s.indices]
        lines = [f"def run(points, {''.join(b.local + ', ' for b in self.buffers.values())}):",
                 f"    for ({point}) in points:"]
        lines += [f"        {t} = {self.expr(ix)}" for t, ix in zip(store, s.indices)]
        check = self._in_bounds(store, target.shape)
        lines.append(f"        if not {check}: oob('writes', {target.name!r}, {target.shape}, "
                     f"({''.join(t + ', ' for t in store)}), ({point}))")
        ref = f"{target.local}[{', '.join(store)}]" if store else f"{target.local}[()]"
        lines.append(f"        {ref} = {self._update(ref, self.expr(s.value))}")
        return "\n".join(lines) + "\n"

    def _update(self, ref: str, value: str) -> str:
        kind = self.stmt.reduction
        if kind is None:
            return value
        if kind is ReduceKind.SUM:
            return f"{ref} + {value}"
        if kind is ReduceKind.PROD:
            return f"{ref} * ({value})"
        return self._minmax(kind is ReduceKind.MIN, ref, value)

    def _slot(self, name: str) -> BufferSlot:
        try:
            return self.buffers[name]
        except KeyError:
            raise PolyloopError(f"statement '{self.stmt.name}' uses buffer '{name}', which the "
                                "program does not declare") from None

    def _temp(self) -> str:
        return f"t_{next(self._temps)}"

    def _constant(self, value: object) -> str:
        name = f"k_{len(self.constants)}"
        self.constants[name] = value
        return name

    @staticmethod
    def _in_bounds(temps: list[str], shape: tuple[int, ...]) -> str:
        # '&' rather than 'and': every index is computed, so the error can show them all
        parts = [f"(0 <= {t} < {n})" for t, n in zip(temps, shape)]
        return f"({' & '.join(parts)})" if parts else "True"

    # expressions --------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self._const(e)
        if isinstance(e, Var):
            return self._var(e)
        if isinstance(e, Load):
            return self._load(e)
        if isinstance(e, BinOp):
            return self._binop(e)
        if isinstance(e, Unary):
            return self._unary(e)
        if isinstance(e, Cast):
            return self._cast(e)
        if isinstance(e, Select):
            return (f"({self.expr(e.true_value)} if {self.expr(e.cond)} "
                    f"else {self.expr(e.false_value)})")
        if isinstance(e, Extern):
            return self._extern(e)
        if isinstance(e, Reduce):
            raise PolyloopError(f"statement '{self.stmt.name}' contains an unlowered reduction "
                                f"{e}; build the Program with to_program()")
        raise PolyloopError(f"cannot interpret expression node {type(e).__name__}")

    def _extern(self, e: Extern) -> str:
        fn = e.function
        if fn.python is None:
            raise PolyloopError(f"extern '{fn.name}' has no Python implementation for the "
                                "reference interpreter; declare it with python=... (a function "
                                "computing the same value)")
        convert = self._constant(e.dtype.numpy.type)
        args = ", ".join(self.expr(a) for a in e.args)
        return f"{convert}({self._constant(fn.python)}({args}))"

    def _const(self, c: Const) -> str:
        if c.dtype is DType.BOOL:
            return repr(bool(c.value))
        if c.dtype is DType.INT64:
            return f"({int(c.value)})"
        return self._constant(c.dtype.numpy.type(c.value))

    def _var(self, v: Var) -> str:
        if v.kind is VarKind.PARAM:
            if v.name not in self.params:
                raise PolyloopError(f"statement '{self.stmt.name}' uses size parameter "
                                    f"'{v.name}', which has no value")
            return f"({self.params[v.name]})"
        if v.name not in self.iters:
            raise PolyloopError(f"statement '{self.stmt.name}' uses '{v.name}', which is not one "
                                f"of its iterators ({', '.join(self.stmt.iters)})")
        return self.iters[v.name]

    def _load(self, ld: Load) -> str:
        slot = self._slot(ld.buffer)
        if len(ld.indices) != len(slot.shape):
            raise PolyloopError(f"statement '{self.stmt.name}' indexes {len(slot.shape)}-d "
                                f"buffer '{ld.buffer}' with {len(ld.indices)} indices")
        temps = [self._temp() for _ in ld.indices]
        assigned = [f"(0 <= ({t} := {self.expr(ix)}) < {n})"
                    for t, ix, n in zip(temps, ld.indices, slot.shape)]
        check = f"({' & '.join(assigned)})" if assigned else "True"
        point = "".join(v + ", " for v in self.iters.values())
        ref = f"{slot.local}[{', '.join(temps)}]" if temps else f"{slot.local}[()]"
        return (f"({ref} if {check} else oob('reads', {slot.name!r}, {slot.shape}, "
                f"({''.join(t + ', ' for t in temps)}), ({point})))")

    def _binop(self, e: BinOp) -> str:
        a, b = self.expr(e.lhs), self.expr(e.rhs)
        if e.op in _ARITHMETIC:
            return f"({a} {_ARITHMETIC[e.op]} {b})"
        if e.op in (BinOpKind.MIN, BinOpKind.MAX):
            return self._minmax(e.op is BinOpKind.MIN, a, b)
        if e.op in (BinOpKind.POW, BinOpKind.FMOD):
            return f"np_{e.op.value.replace('pow', 'power')}({a}, {b})"
        op = "//" if e.op is BinOpKind.FLOORDIV else "%"
        divisor = e.rhs
        if e.lhs.dtype.is_float or (isinstance(divisor, Const) and divisor.value != 0):
            return f"({a} {op} {b})"
        return f"{'int_floordiv' if op == '//' else 'int_mod'}({a}, {b})"

    def _minmax(self, is_min: bool, a: str, b: str) -> str:
        # NaN propagates, as in np.minimum / np.maximum and the generated C
        ta, tb = self._temp(), self._temp()
        cmp = "<=" if is_min else ">="
        return f"({ta} if (({ta} := {a}) {cmp} ({tb} := {b}) or {ta} != {ta}) else {tb})"

    def _unary(self, e: Unary) -> str:
        x = self.expr(e.operand)
        if e.op is UnaryKind.NEG:
            return f"(-{x})"
        if e.op is UnaryKind.NOT:
            return f"(not {x})"
        if e.op is UnaryKind.ABS:
            return f"abs({x})"
        return f"{_MATH[e.op]}({x})"

    def _cast(self, e: Cast) -> str:
        x = self.expr(e.value)
        if e.dtype is DType.BOOL:
            return f"({x} != 0)"
        if e.dtype is e.value.dtype and not e.dtype.is_int:
            return x
        return f"{_CASTS[e.dtype]}({x})"
