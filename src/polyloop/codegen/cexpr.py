# SPDX-License-Identifier: Apache-2.0
"""Expressions in C syntax, for the C-family printer (``cfamily.CFamilyPrinter`` mixes this in
and supplies the tables it reads: ``operators``, ``types``, ``math_functions``, ...): minimal
parentheses, NumPy's integer semantics through helpers, index arithmetic as plain C where the
operands are proven non-negative, literals spelled for the target."""
from __future__ import annotations

import math

import numpy as np

from ..errors import BuildError
from ..ir.dtypes import DType
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Reduce, Select, Unary,
                       UnaryKind, Var, VarKind)
from ..ir.extern import Extern
from ..ir.loops import For
from .half import rounded, widen
from .index_checks import needs_check
from .tables import CONDITIONAL, HELPER_OPERATORS, MULTIPLICATIVE, POSTFIX, UNARY


_NARROW_INTS = frozenset({DType.INT8, DType.UINT8, DType.INT16})
# operators whose result can leave a narrow integer type's range (min, max and comparisons
# cannot)
_WRAPPING = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.FLOORDIV,
                       BinOpKind.MOD, UnaryKind.NEG, UnaryKind.ABS})


class CExpressions:
    """The expression half of ``CFamilyPrinter``."""

    # expressions -------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        """``e`` in C syntax with minimal parentheses."""
        return self._expr(e)[0]

    def index_expr(self, e: Expr, min_prec: int = 0) -> str:
        """``e`` as index arithmetic (an index, a loop bound, a condition on indices): a floor
        division or remainder of a proven non-negative value is plain C division there. A
        value the program computes keeps NumPy's helpers, whatever its operands."""
        self.index_depth += 1
        try:
            return self._operand(e, min_prec)
        finally:
            self.index_depth -= 1

    def _expr(self, e: Expr) -> tuple[str, int]:
        wide = widen(e, self.stored_halves) if self.stored_halves else None
        if wide is not None:    # a 16-bit float the target stores only: computed in float32
            inner, back = wide
            if back is None:
                return self._expr(inner)
            return f"{self.from_float(back)}({self.expr(inner)})", POSTFIX
        if isinstance(e, Const):
            return self.literal(e)
        if isinstance(e, Var):
            return self.variable(e), POSTFIX
        if isinstance(e, Load):
            if needs_check(e.indices):
                cond = self.index_condition(e.buffer, e.indices, str(e), is_write=False)
                zero = f"({self.type_name(e.dtype)})0"
                return f"{cond} ? {self.element(e.buffer, e.indices)} : {zero}", CONDITIONAL
            return self.element(e.buffer, e.indices), POSTFIX
        if isinstance(e, BinOp):
            return self._wrapped(e, *self._binary(e))
        if isinstance(e, Unary):
            return self._wrapped(e, *self._unary(e))
        if isinstance(e, Cast):
            return self._cast(e)
        if isinstance(e, Extern):
            return self._extern(e), POSTFIX
        if isinstance(e, Select):
            parts = [self._operand(x, CONDITIONAL + 1)
                     for x in (e.cond, e.true_value, e.false_value)]
            return f"{parts[0]} ? {parts[1]} : {parts[2]}", CONDITIONAL
        if isinstance(e, Reduce):
            raise BuildError(f"reduction {e} reached code generation; lowering turns "
                             "reductions into an init and an update statement")
        raise BuildError(f"cannot print expression node {type(e).__name__}")

    def _wrapped(self, e: BinOp | Unary, text: str, prec: int) -> tuple[str, int]:
        """C computes a narrow integer's arithmetic in ``int``; NumPy wraps each result to the
        operand type (``int8(100) * int8(3)`` is 44): the result is converted back to it."""
        if e.dtype not in _NARROW_INTS or e.op not in _WRAPPING:
            return text, prec
        inner = f"({text})" if prec < UNARY else text
        return f"({self.type_name(e.dtype)}){inner}", UNARY

    def _cast(self, e: Cast) -> tuple[str, int]:
        src, dst = e.value.dtype, e.dtype
        if src is dst and src in self.stored_halves:
            return self._expr(e.value)
        if src in self.stored_halves:       # widen, then convert from float32 as C does
            text = f"{self.to_float(src)}({self.expr(e.value)})"
            if isinstance(e.value, Const):  # the constant rounded to its dtype, as a float
                text = self._float_literal(Const(rounded(e.value.value, src), DType.FLOAT32))
            if dst is DType.FLOAT32:
                return text, POSTFIX
            if dst in self.stored_halves:
                return f"{self.from_float(dst)}({text})", POSTFIX
            return f"({self.type_name(dst)}){text}", UNARY
        if dst in self.stored_halves:
            value = self.expr(e.value) if src is DType.FLOAT32 else \
                f"(float){self._operand(e.value, UNARY)}"
            return f"{self.from_float(dst)}({value})", POSTFIX
        return f"({self.type_name(dst)}){self._operand(e.value, UNARY)}", UNARY

    def _extern(self, e: Extern) -> str:
        fn = e.function
        if self.target != "c":
            raise BuildError(f"extern '{fn.name}' is C code; target '{self.target}' cannot call "
                             "it (build for target='c')")
        known = self.externs.setdefault(fn.name, fn)
        if known != fn:
            raise BuildError(f"two different extern functions are named '{fn.name}'; declare "
                             "it once with pl.extern and reuse the result")
        return f"{fn.name}({', '.join(self.expr(a) for a in e.args)})"

    def _operand(self, e: Expr, min_prec: int, *, unclear: bool = False) -> str:
        text, prec = self._expr(e)
        return f"({text})" if prec < min_prec or unclear else text

    def _binary(self, e: BinOp) -> tuple[str, int]:
        if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD) and self._plain_division(e):
            # floor and C's truncation agree for a non-negative dividend and positive divisor
            lhs = self._operand(e.lhs, MULTIPLICATIVE)
            return f"{lhs} {'/' if e.op is BinOpKind.FLOORDIV else '%'} " \
                   f"{self._operand(e.rhs, MULTIPLICATIVE + 1)}", MULTIPLICATIVE
        if e.op in HELPER_OPERATORS:
            name = self.use_helper(HELPER_OPERATORS[e.op], e.lhs.dtype)
            return f"{name}({self.expr(e.lhs)}, {self.expr(e.rhs)})", POSTFIX
        if (e.op, e.lhs.dtype) in self.binary_functions:
            name = self.binary_functions[(e.op, e.lhs.dtype)]
            return f"{name}({self.expr(e.lhs)}, {self.expr(e.rhs)})", POSTFIX
        if e.lhs.dtype is DType.FLOAT16 and (e.op, DType.FLOAT32) in self.binary_functions:
            name = self.binary_functions[(e.op, DType.FLOAT32)]
            return (f"({self.type_name(DType.FLOAT16)}){name}((float){self._operand(e.lhs, UNARY)}"
                    f", (float){self._operand(e.rhs, UNARY)})"), UNARY
        if e.op is BinOpKind.DIV and not e.lhs.dtype.is_float:
            raise BuildError(f"true division of {e.lhs.dtype} operands in {e}; the IR casts "
                             "them to float first, so this expression was built by hand")
        symbol, prec = self.operators[e.op]
        if e.op.is_comparison and e.lhs.dtype.is_int and e.rhs.dtype.is_int:
            self.index_depth += 1   # a comparison of integers: a condition on indices
            try:
                lhs = self._operand(e.lhs, prec, unclear=self._unclear(e.op, e.lhs))
                rhs = self._operand(e.rhs, prec + 1, unclear=self._unclear(e.op, e.rhs))
            finally:
                self.index_depth -= 1
            return f"{lhs} {symbol} {rhs}", prec
        lhs = self._operand(e.lhs, prec, unclear=self._unclear(e.op, e.lhs))
        # left-associative: an equal-precedence right operand keeps its parentheses
        rhs = self._operand(e.rhs, prec + 1, unclear=self._unclear(e.op, e.rhs))
        return f"{lhs} {symbol} {rhs}", prec

    def _plain_division(self, e: BinOp) -> bool:
        return (self.index_depth > 0 and e.dtype.is_int and isinstance(e.rhs, Const)
                and isinstance(e.rhs.value, int)
                and not isinstance(e.rhs.value, bool) and e.rhs.value > 0
                and self.nonnegative(e.lhs))

    def nonnegative(self, e: Expr) -> bool:
        """Is the integer ``e`` proven >= 0: built from non-negative constants and iterators
        of loops that start at a non-negative value by +, *, min, max, and floor division and
        modulo by a positive constant? (Size parameters are not assumed non-negative.)"""
        if isinstance(e, Const):
            return isinstance(e.value, int) and e.value >= 0
        if isinstance(e, Var):
            flags = self.nonneg.get(e.name) if e.kind is VarKind.ITER else None
            return bool(flags) and flags[-1]
        if isinstance(e, BinOp):
            if e.op in (BinOpKind.ADD, BinOpKind.MUL, BinOpKind.MIN):
                return self.nonnegative(e.lhs) and self.nonnegative(e.rhs)
            if e.op is BinOpKind.MAX:
                return self.nonnegative(e.lhs) or self.nonnegative(e.rhs)
            if e.op in (BinOpKind.FLOORDIV, BinOpKind.MOD):
                return (self.nonnegative(e.lhs) and isinstance(e.rhs, Const)
                        and isinstance(e.rhs.value, int) and e.rhs.value > 0)
        return False

    def bind_iterator(self, loop: For, var: str) -> None:
        """``loop``'s iterator is spelled ``var`` until ``unbind_iterator``."""
        self.nonneg.setdefault(loop.var, []).append(self.nonnegative(loop.start))
        self.bound.setdefault(loop.var, []).append(var)

    def unbind_iterator(self, loop: For) -> None:
        self.bound[loop.var].pop()
        self.nonneg[loop.var].pop()

    @staticmethod
    def _unclear(op: BinOpKind, child: Expr) -> bool:
        """C allows ``a < b == c`` and ``a && b || c``; readers (and gcc -Wall) want parentheses."""
        if not isinstance(child, BinOp):
            return False
        return (op.is_comparison and child.op.is_comparison
                or op is BinOpKind.OR and child.op is BinOpKind.AND)

    def _unary(self, e: Unary) -> tuple[str, int]:
        if e.op in (UnaryKind.NEG, UnaryKind.NOT):
            text = self._operand(e.operand, UNARY)
            if e.op is UnaryKind.NEG and text.startswith("-"):
                text = f"({text})"  # not "--x"
            return ("-" if e.op is UnaryKind.NEG else "!") + text, UNARY
        # the operand's dtype picks the function (isnan's result is a bool)
        d = e.operand.dtype
        if d is DType.FLOAT16 and (e.op, d) not in self.math_functions:
            # no half-precision libm: compute in float and round back (isnan needs no cast)
            arg = self._operand(e.operand, UNARY)
            call = f"{self.math_function(e.op, DType.FLOAT32)}((float){arg})"
            return (call, POSTFIX) if e.dtype is DType.BOOL else \
                (f"({self.type_name(d)}){call}", UNARY)
        return f"{self.math_function(e.op, d)}({self.expr(e.operand)})", POSTFIX

    def literal(self, c: Const) -> tuple[str, int]:
        """A constant spelled so that C gives it exactly ``c.dtype`` and ``c.value``."""
        if c.dtype is DType.BOOL:
            return ("true" if c.value else "false"), POSTFIX
        text = self._int_literal(c) if c.dtype.is_int else self._float_literal(c)
        return text, UNARY if text[0] in "-(" else POSTFIX

    def _int_literal(self, c: Const) -> str:
        lo, hi, min_name = self.int_limits[c.dtype]
        v = int(c.value)
        if not lo <= v <= hi:
            raise BuildError(f"constant {v} in kernel '{self.kernel.name}' does not fit in "
                             f"{c.dtype} (from {lo} to {hi}), the type the generated code "
                             "computes it in; use smaller constants (steps, moduli, bounds)")
        if v == lo:
            return min_name  # -2**63 has no literal: 2**63 overflows before the minus applies
        if c.dtype is DType.INT64 and not -2**31 <= v < 2**31:
            return self._wide_int64(v)
        return str(v)

    def _wide_int64(self, v: int) -> str:
        """An int64 literal outside the int range (C: ``INT64_C``)."""
        return f"INT64_C({v})"

    def _float_literal(self, c: Const) -> str:
        if c.dtype is DType.FLOAT16:     # a float literal rounded to half, typed as one
            with np.errstate(over="ignore"):
                v = float(np.float16(c.value))
            text = f"{v!r}f" if math.isfinite(v) else \
                "NAN" if math.isnan(v) else "-INFINITY" if v < 0 else "INFINITY"
            return f"({self.type_name(c.dtype)}){text}"
        with np.errstate(over="ignore"):
            v = float(np.float32(c.value)) if c.dtype is DType.FLOAT32 else float(c.value)
        if math.isfinite(v):
            return str(np.float32(v)) + "f" if c.dtype is DType.FLOAT32 else repr(v)
        text = "NAN" if math.isnan(v) else "-INFINITY" if v < 0 else "INFINITY"
        return text if c.dtype is DType.FLOAT32 else f"({self.type_name(c.dtype)}){text}"
