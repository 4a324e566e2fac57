# SPDX-License-Identifier: Apache-2.0
"""The kinds of expression nodes: binary and unary operators, reductions, variables."""
from __future__ import annotations

import enum


class BinOpKind(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"          # true division (integers are cast to float64 first, as NumPy does)
    FLOORDIV = "//"    # floor division, Python semantics
    MOD = "%"          # floor modulo, Python semantics
    MIN = "min"
    MAX = "max"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="
    AND = "and"
    OR = "or"
    POW = "pow"        # C's pow: float operands (integers are computed in float64)
    FMOD = "fmod"      # C's fmod: the remainder takes the sign of the dividend (np.fmod)

    @property
    def is_comparison(self) -> bool:
        return self in _COMPARISONS

    @property
    def is_logical(self) -> bool:
        return self in (BinOpKind.AND, BinOpKind.OR)


_COMPARISONS = frozenset({BinOpKind.LT, BinOpKind.LE, BinOpKind.GT, BinOpKind.GE,
                          BinOpKind.EQ, BinOpKind.NE})


class UnaryKind(enum.Enum):
    NEG = "-"
    NOT = "not"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    TANH = "tanh"
    ABS = "abs"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"    # to the nearest integer, halves to even (np.round, C's rint)
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ERF = "erf"
    ISNAN = "isnan"    # a bool


class ReduceKind(enum.Enum):
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


class VarKind(enum.Enum):
    ITER = "iter"      # a loop iterator of a statement
    PARAM = "param"    # a symbolic size, bound at call time

