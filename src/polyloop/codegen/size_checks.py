# SPDX-License-Identifier: Apache-2.0
"""The size checks a compiled C kernel makes itself, for callers that are not polyloop.

A Python call checks the sizes before the kernel runs (non-negative, the program's
assumptions). A C program calling an exported library gets the same checks from the library:
the entry function first calls ``ENTRY_check_sizes(params)``, which returns NULL when the sizes
are fine and otherwise the condition they break, as text; the entry then returns
``SIZE_CHECK_STATUS`` without touching any array. The conditions are evaluated exactly: in
128-bit integers (an assumption is affine in the sizes, each below 2**63, so no sum or product
with a constant of it can overflow), with floor division and modulo as isl and Python mean them.
A target without 128-bit integers (32-bit ARM) evaluates them in 64 bits: exact while each term
fits, which sizes of arrays that fit its memory do.
"""
from __future__ import annotations

from ..errors import BuildError
from ..ir.assumption import Assumption
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Expr, Unary, UnaryKind, Var
from .writer import CodeWriter

SIZE_CHECK_STATUS = 3

_INFIX = {BinOpKind.ADD: "+", BinOpKind.SUB: "-", BinOpKind.MUL: "*", BinOpKind.LT: "<",
          BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=", BinOpKind.EQ: "==",
          BinOpKind.NE: "!=", BinOpKind.AND: "&&", BinOpKind.OR: "||"}
_CALLS = {BinOpKind.FLOORDIV: "pl_size_floordiv", BinOpKind.MOD: "pl_size_mod",
          BinOpKind.MIN: "pl_size_min", BinOpKind.MAX: "pl_size_max"}
_GUARD = "POLYLOOP_SIZE_CHECK_HELPERS"
_WIDE = "pl_size_wide"
# the integer type of the conditions: 128 bits where the compiler has them
_WIDE_TYPE = ("#ifndef POLYLOOP_SIZE_WIDE", "#define POLYLOOP_SIZE_WIDE",
              "#ifdef __SIZEOF_INT128__", f"typedef __int128 {_WIDE};", "#else",
              f"typedef long long {_WIDE};", "#endif", "#endif")
# floor division and modulo of 128-bit integers (a zero divisor gives 0, as NumPy's do)
_HELPERS = (
    "static inline pl_size_wide pl_size_floordiv(pl_size_wide a, pl_size_wide b) {",
    "    if (b == 0) return 0;",
    "    pl_size_wide q = a / b;",
    "    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;",
    "}",
    "static inline pl_size_wide pl_size_mod(pl_size_wide a, pl_size_wide b) {",
    "    return b == 0 ? 0 : a - b * pl_size_floordiv(a, b);",
    "}",
    "static inline pl_size_wide pl_size_min(pl_size_wide a, pl_size_wide b) {",
    "    return a < b ? a : b;",
    "}",
    "static inline pl_size_wide pl_size_max(pl_size_wide a, pl_size_wide b) {",
    "    return a > b ? a : b;",
    "}",
)
# __int128 is a GCC/Clang extension, which -Wpedantic reports
_QUIET = ('#pragma GCC diagnostic push', '#pragma GCC diagnostic ignored "-Wpedantic"')


def check_symbol(entry: str) -> str:
    """The exported function that checks a kernel's sizes."""
    return f"{entry}_check_sizes"


def size_conditions(params: tuple[str, ...], assumptions: tuple[Assumption, ...]
                    ) -> list[tuple[str, str]]:
    """(C condition, text) of every check, in order: each size is non-negative, then each
    assumption (in 128-bit integers).

    >>> from polyloop.ir.program import param
    >>> first, second = size_conditions(("n",), (Assumption(param("n") % 4 == 0),))
    >>> first
    ('params[0] >= 0', 'n >= 0')
    >>> print(second[0])
    (pl_size_mod(((pl_size_wide)params[0]), ((pl_size_wide)4)) == ((pl_size_wide)0))
    """
    slots = {p: k for k, p in enumerate(params)}
    out = [(f"params[{k}] >= 0", f"{p} >= 0") for k, p in enumerate(params)]
    out += [(_expr(a.condition, slots), str(a)) for a in assumptions]
    return out


def emit_size_checks(w: CodeWriter, entry: str, params: tuple[str, ...],
                     assumptions: tuple[Assumption, ...]) -> None:
    """``const char *ENTRY_check_sizes(const int64_t *params)`` (and the 128-bit helpers its
    assumptions use). Nothing for a kernel without sizes."""
    if not params:
        return
    conditions = size_conditions(params, assumptions)
    if assumptions:
        w.lines(_QUIET)
        w.lines(_WIDE_TYPE)
    if any(name in c for c, _ in conditions for name in _CALLS.values()):
        w.line(f"#ifndef {_GUARD}")
        w.line(f"#define {_GUARD}")
        w.lines(_HELPERS)
        w.line("#endif")
    w.comment("NULL when the sizes satisfy every condition the kernel was built for, else "
              "the first one they break")
    with w.block(f"const char *{check_symbol(entry)}(const int64_t *params)"):
        for condition, text in conditions:
            w.statement(f"if (!({condition})) return {c_string(text)}")
        w.statement("return (const char *)0")
    if assumptions:
        w.line("#pragma GCC diagnostic pop")
    w.line()


def emit_size_check_call(w: CodeWriter, entry: str, params: tuple[str, ...]) -> None:
    """The entry's first statement: refuse sizes that break a condition."""
    if params:
        w.statement(f"if ({check_symbol(entry)}(params)) return {SIZE_CHECK_STATUS}")


def c_string(text: str) -> str:
    r"""``text`` as a C string literal: printable ASCII as itself, except ``"``, ``\`` and
    ``?`` (trigraphs), which are escaped, as is everything else (octal escapes).

    >>> print(c_string('n >= 1 "x" \\ ä??'))
    "n >= 1 \"x\" \\ \303\244\077\077"
    """
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~" and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _expr(e: Expr, slots: dict[str, int]) -> str:
    if isinstance(e, Const) and isinstance(e.value, (bool, int)):
        return _integer(int(e.value))
    if isinstance(e, Var) and e.name in slots:
        return f"(({_WIDE})params[{slots[e.name]}])"
    if isinstance(e, Cast):
        return _expr(e.value, slots)
    if isinstance(e, Unary) and e.op in (UnaryKind.NEG, UnaryKind.NOT):
        return f"({'-' if e.op is UnaryKind.NEG else '!'}{_expr(e.operand, slots)})"
    if isinstance(e, BinOp) and e.op in _INFIX:
        return f"({_expr(e.lhs, slots)} {_INFIX[e.op]} {_expr(e.rhs, slots)})"
    if isinstance(e, BinOp) and e.op in _CALLS:
        return f"{_CALLS[e.op]}({_expr(e.lhs, slots)}, {_expr(e.rhs, slots)})"
    raise BuildError(f"assumption term {e} is not integer arithmetic on the size parameters "
                     f"{', '.join(slots) or '(none)'}; state assumptions with +, -, * by a "
                     "constant, // and % by a constant, and comparisons")


def _integer(v: int) -> str:
    """An integer constant of any size as a 128-bit C expression (C has no literal wider
    than 64 bits: larger ones are built from 32-bit halves)."""
    if -2**62 <= v < 2**62:
        return f"(({_WIDE}){v})"
    high, low = divmod(v, 2**32)
    return f"({_integer(high)} * (({_WIDE})4294967296) + (({_WIDE}){low}))"
