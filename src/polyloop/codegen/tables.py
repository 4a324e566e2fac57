# SPDX-License-Identifier: Apache-2.0
"""How C spells things: operators and their precedence, types, math functions, keywords.

Other C-family targets copy a table and change the entries that differ.
"""
from __future__ import annotations

from ..ir.dtypes import DType
from ..ir.expr import BinOpKind, ReduceKind, UnaryKind
from .helpers import HelperKind

# C operator precedence: higher binds tighter.
POSTFIX, UNARY, MULTIPLICATIVE, ADDITIVE, RELATIONAL, EQUALITY = 16, 15, 13, 12, 10, 9
LOGICAL_AND, LOGICAL_OR, CONDITIONAL = 5, 4, 3

C_OPERATORS: dict[BinOpKind, tuple[str, int]] = {
    BinOpKind.ADD: ("+", ADDITIVE), BinOpKind.SUB: ("-", ADDITIVE),
    BinOpKind.MUL: ("*", MULTIPLICATIVE), BinOpKind.DIV: ("/", MULTIPLICATIVE),
    BinOpKind.LT: ("<", RELATIONAL), BinOpKind.LE: ("<=", RELATIONAL),
    BinOpKind.GT: (">", RELATIONAL), BinOpKind.GE: (">=", RELATIONAL),
    BinOpKind.EQ: ("==", EQUALITY), BinOpKind.NE: ("!=", EQUALITY),
    BinOpKind.AND: ("&&", LOGICAL_AND), BinOpKind.OR: ("||", LOGICAL_OR),
}
# Operators whose NumPy meaning C's operators do not have: printed as helper calls.
HELPER_OPERATORS = {BinOpKind.FLOORDIV: HelperKind.FLOORDIV, BinOpKind.MOD: HelperKind.MOD,
                    BinOpKind.MIN: HelperKind.MIN, BinOpKind.MAX: HelperKind.MAX}
REDUCTION_HELPERS = {ReduceKind.MAX: HelperKind.MAX, ReduceKind.MIN: HelperKind.MIN}

C_TYPES = {DType.BOOL: "bool", DType.INT32: "int32_t", DType.INT64: "int64_t",
           DType.FLOAT32: "float", DType.FLOAT64: "double", DType.INT8: "int8_t",
           DType.UINT8: "uint8_t", DType.INT16: "int16_t", DType.FLOAT16: "_Float16",
           DType.BFLOAT16: "uint16_t"}    # bfloat16: its bits (codegen.half)
C_UNSIGNED_TYPES = {DType.INT32: "uint32_t", DType.INT64: "uint64_t", DType.INT8: "uint8_t",
                    DType.UINT8: "uint8_t", DType.INT16: "uint16_t"}
C_LIBM_SUFFIX = {DType.FLOAT32: "f", DType.FLOAT64: ""}
C_MATH_FUNCTIONS = {
    (UnaryKind.EXP, DType.FLOAT32): "expf", (UnaryKind.EXP, DType.FLOAT64): "exp",
    (UnaryKind.LOG, DType.FLOAT32): "logf", (UnaryKind.LOG, DType.FLOAT64): "log",
    (UnaryKind.SQRT, DType.FLOAT32): "sqrtf", (UnaryKind.SQRT, DType.FLOAT64): "sqrt",
    (UnaryKind.TANH, DType.FLOAT32): "tanhf", (UnaryKind.TANH, DType.FLOAT64): "tanh",
    (UnaryKind.FLOOR, DType.FLOAT32): "floorf", (UnaryKind.FLOOR, DType.FLOAT64): "floor",
    (UnaryKind.ABS, DType.FLOAT32): "fabsf", (UnaryKind.ABS, DType.FLOAT64): "fabs",
    **{(op, d): name + C_LIBM_SUFFIX[d] for op, name in (
        (UnaryKind.CEIL, "ceil"), (UnaryKind.ROUND, "rint"), (UnaryKind.SIN, "sin"),
        (UnaryKind.COS, "cos"), (UnaryKind.TAN, "tan"), (UnaryKind.ERF, "erf"))
       for d in (DType.FLOAT32, DType.FLOAT64)},
    (UnaryKind.ISNAN, DType.FLOAT32): "isnan", (UnaryKind.ISNAN, DType.FLOAT64): "isnan",
    (UnaryKind.ABS, DType.INT32): "abs", (UnaryKind.ABS, DType.INT64): "llabs",
}
# Binary operators that are libm calls: (operator, operand dtype) -> function.
C_BINARY_FUNCTIONS = {(op, d): name + C_LIBM_SUFFIX[d]
                      for op, name in ((BinOpKind.POW, "pow"), (BinOpKind.FMOD, "fmod"))
                      for d in (DType.FLOAT32, DType.FLOAT64)}
C_INT_LIMITS = {DType.INT8: (-2**7, 2**7 - 1, "INT8_MIN"), DType.UINT8: (0, 2**8 - 1, "0"),
                DType.INT16: (-2**15, 2**15 - 1, "INT16_MIN"),
                DType.INT32: (-2**31, 2**31 - 1, "INT32_MIN"),
                DType.INT64: (-2**63, 2**63 - 1, "INT64_MIN")}

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while bool true false NULL INFINITY NAN main
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
    _Thread_local""".split())
