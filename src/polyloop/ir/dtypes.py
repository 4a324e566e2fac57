# SPDX-License-Identifier: Apache-2.0
"""Scalar types of polyloop values and NumPy-style promotion (NEP 50)."""
from __future__ import annotations

import enum

import numpy as np

from ..errors import DTypeError, PolyloopError


class DType(enum.Enum):
    BOOL = "bool"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    # storage types: arrays of them are read and written, arithmetic follows C (integers are
    # computed as int and wrap when stored; float16 is computed in float32 and rounded)
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    FLOAT16 = "float16"

    @property
    def is_float(self) -> bool:
        return self in (DType.FLOAT16, DType.FLOAT32, DType.FLOAT64)

    @property
    def is_int(self) -> bool:
        return self in (DType.INT8, DType.UINT8, DType.INT16, DType.INT32, DType.INT64)

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.value)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    def __str__(self) -> str:
        return self.value


# Loop iterators and size parameters are 64-bit integers that behave like Python ints.
INDEX = DType.INT64

_SPELLINGS = {d.value: d for d in DType}


def as_dtype(value: object) -> DType:
    """Parse a user spelling ("float32", np.float32, np.dtype) into a DType, once, at the edge."""
    if isinstance(value, DType):
        return value
    try:
        name = np.dtype(value).name  # type: ignore[arg-type]
    except TypeError:
        name = str(value)
    if name == "bfloat16" or str(value) == "bfloat16":
        raise PolyloopError("bfloat16 is not supported: NumPy has no bfloat16 arrays to pass; "
                            "store the data as float16 or float32")
    if name not in _SPELLINGS:
        valid = ", ".join(sorted(_SPELLINGS))
        raise PolyloopError(f"unsupported dtype {value!r}; valid dtypes are {valid}")
    return _SPELLINGS[name]


_RANK = {DType.BOOL: 0, DType.INT8: 1, DType.UINT8: 1, DType.INT16: 2, DType.INT32: 3,
         DType.INT64: 4, DType.FLOAT16: 5, DType.FLOAT32: 6, DType.FLOAT64: 7}


def promote(a: DType, a_weak: bool, b: DType, b_weak: bool, *, what: str) -> tuple[DType, bool]:
    """Result dtype of a binary operation under NumPy 2 rules.

    A *weak* operand is a Python number or an index expression: it takes the dtype of a strong
    (tensor-derived) operand of the same kind (int with int, float with float). A weak float
    with a strong int gives float64, as NumPy does. Two strong operands must agree.
    """
    if a_weak and b_weak:
        return (a if _RANK[a] >= _RANK[b] else b), True
    if not a_weak and not b_weak:
        if a is not b:
            raise DTypeError(
                f"cannot mix {a} and {b} in {what}; cast one operand explicitly with .astype()")
        return a, False
    strong, weak = (a, b) if b_weak else (b, a)
    if weak.is_float and not strong.is_float:
        return DType.FLOAT64, False
    if weak is DType.BOOL or strong is not DType.BOOL:
        return strong, False
    return weak, False


def c_name(d: DType) -> str:
    return {DType.BOOL: "bool", DType.INT32: "int32_t", DType.INT64: "int64_t",
            DType.FLOAT32: "float", DType.FLOAT64: "double", DType.INT8: "int8_t",
            DType.UINT8: "uint8_t", DType.INT16: "int16_t", DType.FLOAT16: "_Float16"}[d]
