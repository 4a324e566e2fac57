# SPDX-License-Identifier: Apache-2.0
"""Turning the syntax of kernel instructions into polyloop expressions: name resolution,
functions, reductions, NumPy-style dtypes."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DTypeError, ParseError, PolyloopError
from ..ir.dtypes import DType, as_dtype
from ..ir import quantize as qz
from ..ir.expr import (BinOpKind, Const, Expr, Load, ReduceKind, UnaryKind, Var, VarKind, binop,
                       cast, const, select, unary)
from .kernel_lines import SubstRule
from .kernel_parse import Syntax, SyntaxErrorAt, error_at

_BINARY = {"+": BinOpKind.ADD, "-": BinOpKind.SUB, "*": BinOpKind.MUL, "/": BinOpKind.DIV,
           "//": BinOpKind.FLOORDIV, "%": BinOpKind.MOD, "<": BinOpKind.LT, "<=": BinOpKind.LE,
           ">": BinOpKind.GT, ">=": BinOpKind.GE, "==": BinOpKind.EQ, "!=": BinOpKind.NE,
           "and": BinOpKind.AND, "or": BinOpKind.OR}
_UNARY_FUNCTIONS = {"sqrt": UnaryKind.SQRT, "exp": UnaryKind.EXP, "log": UnaryKind.LOG,
                    "tanh": UnaryKind.TANH, "abs": UnaryKind.ABS, "fabs": UnaryKind.ABS,
                    "floor": UnaryKind.FLOOR, "ceil": UnaryKind.CEIL, "round": UnaryKind.ROUND,
                    "rint": UnaryKind.ROUND, "sin": UnaryKind.SIN, "cos": UnaryKind.COS,
                    "tan": UnaryKind.TAN, "erf": UnaryKind.ERF, "isnan": UnaryKind.ISNAN}
_REDUCTIONS = {"sum": ReduceKind.SUM, "max": ReduceKind.MAX, "min": ReduceKind.MIN}
# rules calling rules: deeper than this is a rule that calls itself
_MAX_EXPANSION = 32
_CASTS = {"float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64"}
# the quantization helpers: name -> (function, value arguments, of which required); a dtype
# name (int8, uint8, ...) follows the values where the function takes one
_QUANTIZE = {"saturate": (qz.saturate, 1, 1), "requantize": (qz.requantize, 3, 2),
             "quantize_linear": (qz.quantize_linear, 3, 2)}
FUNCTIONS = sorted(set(_UNARY_FUNCTIONS) | set(_REDUCTIONS) | _CASTS | set(_QUANTIZE)
                   | {"where", "if", "dequantize_linear"})


@dataclass(frozen=True, slots=True)
class Reduction:
    """``sum(k, source)`` at the top of an instruction's right-hand side."""
    kind: ReduceKind
    inames: tuple[str, ...]
    source: Expr


@dataclass
class Names:
    """What every name of a kernel is. ``dtypes`` of arrays and temporaries may still be
    unknown (None) while they are being inferred: such loads are weak."""
    inames: set[str]
    params: set[str]
    arrays: dict[str, int]                       # name -> number of dimensions
    dtypes: dict[str, DType | None]
    scalars: set[str] = field(default_factory=set)   # 0-d arrays used by bare name
    rules: dict[str, SubstRule] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RuleUse:
    """One expansion of a substitution rule: its arguments and the expression they gave."""
    rule: str
    args: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, slots=True)
class KernelRule:
    """A substitution rule of a kernel: its body as an expression of its parameters (integer
    ``Var``s; None when it needs other arguments), its expansions in the kernel, its text."""
    name: str
    params: tuple[str, ...]
    body: Expr | None
    uses: tuple[RuleUse, ...]
    text: str


class Converter:
    """Converts one instruction's syntax; reports errors at the offending column."""

    def __init__(self, names: Names, uses: list[RuleUse] | None = None):
        self.names = names
        self.bound: list[str] = []       # reduction inames in scope
        self.env: list[dict[str, Expr]] = []     # the arguments of the rules being expanded
        self.uses = uses                 # where to note each expansion (None: not noted)

    def reduction_inames(self, syn: Syntax) -> tuple[str, ...] | None:
        """The inames of ``sum(k, ...)``'s first argument, or None if it is not one."""
        first = syn.args[0] if syn.args else None
        items = first.args if first is not None and first.kind == "tuple" else (first,)
        if first is None or not all(x is not None and x.kind == "name" and
                                    x.text in self.names.inames for x in items):
            return None
        return tuple(x.text for x in items)  # type: ignore[union-attr]

    def top(self, syn: Syntax) -> Expr | Reduction:
        """The right-hand side: a plain expression or a reduction."""
        if syn.kind == "call" and syn.text in _REDUCTIONS and len(syn.args) == 2:
            inames = self.reduction_inames(syn)
            if inames is not None:
                self.bound.extend(inames)
                try:
                    src = self.expr(syn.args[1])
                finally:
                    del self.bound[-len(inames):]
                if src.weak:
                    src = cast(src.dtype, src)
                return Reduction(_REDUCTIONS[syn.text], inames, src)
        return self.expr(syn)

    def expr(self, syn: Syntax) -> Expr:
        try:
            return self._expr(syn)
        except (DTypeError, PolyloopError) as e:
            if isinstance(e, (SyntaxErrorAt, ParseError)):
                raise
            raise SyntaxErrorAt(syn.col, str(e)) from None

    def _expr(self, s: Syntax) -> Expr:
        if s.kind == "number":
            return _number(s)
        if s.kind == "name":
            return self.name(s)
        if s.kind == "subscript":
            return self.subscript(s)
        if s.kind == "binary":
            return self.binary(s)
        if s.kind == "unary":
            operand = self.expr(s.args[0])
            return unary(UnaryKind.NOT if s.text == "not" else UnaryKind.NEG, operand)
        if s.kind == "call":
            return self.call(s)
        raise SyntaxErrorAt(s.col, "a tuple is only allowed as the inames of a reduction, "
                            "like sum((k, l), ...)")

    def name(self, s: Syntax) -> Expr:
        n = self.names
        if self.env and s.text in self.env[-1]:
            return self.env[-1][s.text]
        if s.text in n.inames:
            return Var(s.text)
        if s.text in n.params:
            return Var(s.text, VarKind.PARAM)
        if s.text in n.arrays:
            if n.arrays[s.text] != 0:
                raise SyntaxErrorAt(s.col, f"'{s.text}' is an array with {n.arrays[s.text]} "
                                    "dimension(s); index it")
            return self.load(s.text, (), s.col)
        raise SyntaxErrorAt(s.col, f"unknown name '{s.text}': not an iname, size parameter, "
                            "array or temporary; declare a scalar argument with "
                            f"args=[pl.ValueArg({s.text!r}, 'float32')]")

    def load(self, name: str, idx: tuple[Expr, ...], col: int) -> Load:
        d = self.names.dtypes.get(name)
        if d is None:
            return Load(name, idx, DType.FLOAT32, weak=True)
        return Load(name, idx, d)

    def subscript(self, s: Syntax) -> Expr:
        n = self.names
        if self.env and s.text in self.env[-1]:
            raise SyntaxErrorAt(s.col, f"'{s.text}' is an argument of the rule, not an array; "
                                "only arrays are indexed")
        if s.text not in n.arrays:
            kind = "an iname" if s.text in n.inames else "a size parameter" \
                if s.text in n.params else "unknown"
            raise SyntaxErrorAt(s.col, f"'{s.text}' is {kind}, not an array; only arrays are "
                                "indexed")
        if len(s.args) != n.arrays[s.text]:
            raise SyntaxErrorAt(s.col, f"'{s.text}' has {n.arrays[s.text]} dimension(s), "
                                f"indexed with {len(s.args)}")
        idx = []
        for a in s.args:
            e = self.expr(a)
            if not e.dtype.is_int:
                raise SyntaxErrorAt(a.col, f"index {a} of '{s.text}' is {e.dtype}; indices "
                                    "must be integers")
            idx.append(e)
        return self.load(s.text, tuple(idx), s.col)

    def binary(self, s: Syntax) -> Expr:
        lhs, rhs = self.expr(s.args[0]), self.expr(s.args[1])
        if s.text == "**":
            return _power(lhs, rhs, s)
        return binop(_BINARY[s.text], lhs, rhs)

    def call(self, s: Syntax) -> Expr:
        fn, args = s.text, s.args
        if fn in _REDUCTIONS and len(args) == 2 and self.reduction_inames(s) is not None:
            raise SyntaxErrorAt(s.col, f"a reduction {fn}(...) must be the whole right-hand "
                                "side; assign it to a temporary first: <> t = "
                                f"{fn}(...), then use t")
        if fn in self.names.rules:
            return self.expand(self.names.rules[fn], s)
        if fn in _UNARY_FUNCTIONS:
            _arity(s, 1)
            return unary(_UNARY_FUNCTIONS[fn], self.expr(args[0]))
        if fn in ("min", "max"):
            _arity(s, 2)
            return binop(BinOpKind.MIN if fn == "min" else BinOpKind.MAX, self.expr(args[0]),
                         self.expr(args[1]))
        if fn in ("where", "if"):
            _arity(s, 3)
            return select(*(self.expr(a) for a in args))
        if fn in _CASTS:
            _arity(s, 1)
            return cast(as_dtype(fn), self.expr(args[0]))
        if fn in _QUANTIZE:
            return self.quantize(s)
        if fn == "dequantize_linear":
            if len(args) not in (2, 3):
                raise SyntaxErrorAt(s.col, "dequantize_linear(q, scale[, zero_point]) takes 2 "
                                    f"or 3 arguments, got {len(args)}")
            return qz.dequantize_linear(*(self.expr(a) for a in args))
        if fn == "sum":
            raise SyntaxErrorAt(s.col, "sum(k, expr) reduces over iname(s) k; the first "
                                "argument must be an iname or a tuple of inames")
        rules = f"; substitution rules: {', '.join(self.names.rules)}" if self.names.rules else ""
        raise SyntaxErrorAt(s.col, f"unknown function '{fn}'; functions: {', '.join(FUNCTIONS)}"
                            + rules)

    def quantize(self, s: Syntax) -> Expr:
        """``saturate(x, int8)``, ``requantize(x, scale, zero_point, uint8)``: values, then
        the name of an integer dtype."""
        fn, values, required = _QUANTIZE[s.text]
        *vals, last = s.args if s.args else (None,)
        if last is None or last.kind != "name" or last.text not in _CASTS \
                or not required <= len(vals) <= values:
            raise SyntaxErrorAt(s.col, f"{s.text}() takes {required} to {values} values and "
                                "the name of an integer type, like "
                                f"{s.text}(x{', 0.5, 3' if values > 1 else ''}, int8)")
        return fn(*(self.expr(a) for a in vals), dtype=last.text)

    def expand(self, rule: SubstRule, s: Syntax) -> Expr:
        """A call of a substitution rule: its body with the parameters bound to the arguments
        (converted where the rule is called, so their dtypes give the body's dtype)."""
        if len(s.args) != len(rule.params):
            raise SyntaxErrorAt(s.col, f"rule '{rule.name}' takes {len(rule.params)} "
                                f"argument(s) ({', '.join(rule.params)}), got {len(s.args)}")
        args = tuple(self.expr(a) for a in s.args)
        if len(self.env) >= _MAX_EXPANSION:
            raise SyntaxErrorAt(s.col, f"substitution rule '{rule.name}' is expanded more than "
                                f"{_MAX_EXPANSION} levels deep; a rule cannot call itself")
        self.env.append(dict(zip(rule.params, args)))
        bound, self.bound = self.bound, []
        try:
            out = self.expr(rule.body)
        except SyntaxErrorAt as e:
            raise error_at(rule.text, rule.line, e.col, f"{e.message} (in substitution rule "
                           f"'{rule.name}', called as {s})") from None
        finally:
            self.env.pop()
            self.bound = bound
        if self.uses is not None:
            self.uses.append(RuleUse(rule.name, args, out))
        return out


def _arity(s: Syntax, n: int) -> None:
    if len(s.args) != n:
        raise SyntaxErrorAt(s.col, f"{s.text}() takes {n} argument(s), got {len(s.args)}")


def _number(s: Syntax) -> Const:
    text = s.text.rstrip("fFdD") if not s.text.isdigit() else s.text
    if s.text[-1] in "fF":
        return const(float(text), "float32")
    if s.text[-1] in "dD":
        return const(float(text), "float64")
    if any(c in text for c in ".eE"):
        return const(float(text))
    return const(int(text))


def _power(base: Expr, exponent: Expr, s: Syntax) -> Expr:
    if not (isinstance(exponent, Const) and isinstance(exponent.value, int)
            and not isinstance(exponent.value, bool) and 0 <= exponent.value <= 64):
        raise SyntaxErrorAt(s.col, "'**' takes a constant integer exponent from 0 to 64 "
                            f"(got {s.args[1]}); write exp(y*log(x)) for other powers")
    if exponent.value == 0:
        return const(1, base.dtype) if not base.weak else const(1)
    out = base
    for _ in range(exponent.value - 1):
        out = binop(BinOpKind.MUL, out, base)
    return out


_RANK = {DType.BOOL: 0, DType.INT8: 1, DType.UINT8: 1, DType.INT16: 2, DType.INT32: 3,
         DType.INT64: 4, DType.FLOAT16: 5, DType.BFLOAT16: 5, DType.FLOAT32: 6,
         DType.FLOAT64: 7}


def join_dtypes(a: tuple[DType, bool] | None, b: tuple[DType, bool]) -> tuple[DType, bool]:
    """The dtype of a name that is assigned values of dtypes a and b ((dtype, weak) pairs):
    a strong dtype wins over weak ones, and the wider of two of the same kind wins."""
    if a is None:
        return b
    if a[1] != b[1]:
        strong, weak = (a, b) if b[1] else (b, a)
        if weak[0].is_float and not strong[0].is_float:
            return DType.FLOAT64, False
        return strong
    return (a if _RANK[a[0]] >= _RANK[b[0]] else b)[0], a[1]
