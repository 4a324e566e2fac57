# SPDX-License-Identifier: Apache-2.0
"""The vector types of generated C code and the helpers the vector library defines on them.

>>> VecType(DType.FLOAT32, 8).name, VecType(DType.FLOAT32, 8).mask.name
('v8f', 'v8i')
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from ..ir.dtypes import DType
from .tables import C_TYPES

SUFFIX = {DType.FLOAT32: "f", DType.FLOAT64: "d", DType.INT32: "i", DType.INT64: "l"}
INT_OF_SIZE = {4: DType.INT32, 8: DType.INT64}


@dataclass(frozen=True, slots=True)
class VecType:
    """A vector of ``lanes`` elements of ``dtype``."""
    dtype: DType
    lanes: int

    @property
    def name(self) -> str:
        return f"v{self.lanes}{SUFFIX[self.dtype]}"

    @property
    def unaligned(self) -> str:
        return self.name + "_u"

    @property
    def element(self) -> str:
        return C_TYPES[self.dtype]

    @property
    def bytes(self) -> int:
        return self.lanes * self.dtype.itemsize

    @property
    def mask(self) -> VecType:
        """The integer vector a comparison of two such vectors gives (-1 true, 0 false)."""
        return VecType(INT_OF_SIZE[self.dtype.itemsize], self.lanes)


class VectorOp(enum.Enum):
    """Helpers, in the order the prelude defines them (a helper calls only earlier ones)."""
    BROADCAST = "broadcast"
    LOAD = "load"
    LOAD_ALIGNED = "load_aligned"
    LOAD_MASKED = "load_masked"
    LOAD_WHERE = "load_where"
    LOAD_WHERE_MASKED = "load_where_masked"
    STORE = "store"
    STORE_ALIGNED = "store_aligned"
    STORE_MASKED = "store_masked"
    STORE_STREAM = "store_stream"
    LANES_BELOW = "lanes_below"
    LOAD_WHERE_BITS = "load_where_bits"
    SELECT_BITS = "select_bits"
    ALIGN_GAP = "align_gap"
    IOTA = "iota"
    LANE_OFFSET = "lane_offset"
    SELECT = "select"
    MAX = "max"
    MIN = "min"
    ABS = "abs"
    SQRT = "sqrt"
    EXP = "exp"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ERF = "erf"
    LOG = "log"
    TANH = "tanh"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    POW = "pow"
    FMOD = "fmod"
