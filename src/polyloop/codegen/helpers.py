# SPDX-License-Identifier: Apache-2.0
"""Small typed helper functions that generated code calls where C's operators differ from NumPy.

C's ``/`` and ``%`` truncate toward zero and trap on ``x / 0``; NumPy floors and returns 0.
C's ``fmax`` ignores NaN; ``np.maximum`` propagates it. Each helper is emitted once, only when
used, as a ``static inline`` function that the compiler folds away for constant operands.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from string import Template
from typing import Mapping

from ..errors import BuildError
from ..ir.dtypes import DType
from .vector_math import exp_scalar_body
from .writer import CodeWriter


class HelperKind(enum.Enum):
    FLOORDIV = "floordiv"
    MOD = "mod"
    MIN = "min"
    MAX = "max"
    EXP = "exp"             # C's scalar exp, vectorizable (vector_math.exp_scalar_body)
    ALLOC_BYTES = "alloc_bytes"


DTYPE_SUFFIX = {DType.INT32: "i32", DType.INT64: "i64", DType.FLOAT32: "f32", DType.FLOAT64: "f64",
                DType.INT8: "i8", DType.UINT8: "u8", DType.INT16: "i16", DType.FLOAT16: "f16"}


@dataclass(frozen=True, slots=True)
class Helper:
    """One helper function: a kind and, for the arithmetic ones, the operand dtype."""
    kind: HelperKind
    dtype: DType | None = None

    @property
    def name(self) -> str:
        if self.dtype is None:
            return f"pl_{self.kind.value}"
        return f"pl_{self.kind.value}_{DTYPE_SUFFIX[self.dtype]}"

    @property
    def sort_key(self) -> tuple[int, int]:
        order = list(DType).index(self.dtype) if self.dtype is not None else -1
        return list(HelperKind).index(self.kind), order


def helper(kind: HelperKind, dtype: DType | None) -> Helper:
    """The helper for ``kind`` on operands of ``dtype``; raises BuildError when there is none."""
    if kind is not HelperKind.ALLOC_BYTES and dtype not in DTYPE_SUFFIX:
        raise BuildError(f"'{kind.value}' is not defined on {dtype} operands; cast them with "
                         ".astype() to an integer or float dtype")
    return Helper(kind, dtype if kind is not HelperKind.ALLOC_BYTES else None)


# Bodies follow NumPy's loops (npy_divmod for floats); $T is the type, $U its unsigned twin,
# $f the suffix of libm functions for $T.
_INT_BODIES = {
    HelperKind.FLOORDIV: [
        "if (b == 0) return 0;  // NumPy's result; C would trap",
        "if (b == -1) return ($T)(0 - ($U)a);  // the minimum value wraps, as in NumPy",
        "$T q = a / b, r = a % b;",
        "return (r != 0 && (r < 0) != (b < 0)) ? q - 1 : q;",
    ],
    HelperKind.MOD: [
        "if (b == 0 || b == -1) return 0;",
        "$T r = a % b;",
        "return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;",
    ],
    HelperKind.MIN: ["return a <= b ? a : b;"],
    HelperKind.MAX: ["return a >= b ? a : b;"],
}
_FLOAT_BODIES = {
    HelperKind.FLOORDIV: [
        "if (b == 0) return a / b;",
        "$T mod = fmod$f(a, b);",
        "$T div = (a - mod) / b;",
        "if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;",
        "if (div == 0) return copysign$f(0, a / b);",
        "$T q = floor$f(div);",
        "return div - q > 0.5 ? q + 1 : q;  // snap to the nearest integer, as NumPy does",
    ],
    HelperKind.MOD: [
        "$T mod = fmod$f(a, b);",
        "if (b == 0) return mod;",
        "if (mod == 0) return copysign$f(0, b);",
        "return (b < 0) != (mod < 0) ? mod + b : mod;",
    ],
    # a != a: NaN propagates, as in np.minimum / np.maximum. Two selects, not `a <= b || a != a`:
    # gcc turns the `||` into a branch, which mispredicts on real data (a ReLU, a max-pool)
    HelperKind.MIN: ["$T r = a <= b ? a : b;", "return a != a ? a : r;"],
    HelperKind.MAX: ["$T r = a >= b ? a : b;", "return a != a ? a : r;"],
}


def _emit_alloc_bytes(w: CodeWriter, h: Helper, qualifier: str) -> None:
    """The bytes to allocate for an array of ``ndim`` dimensions ``dims``: whole 64-byte lines,
    at least one (aligned_alloc(64, 0) may fail); a byte count that overflows becomes a request
    no memory can satisfy, so the allocation fails instead of returning a short buffer."""
    with w.block(f"{qualifier} size_t {h.name}(size_t itemsize, int ndim, const int64_t *dims)"):
        w.line("size_t n = itemsize;")
        with w.block("for (int k = 0; k < ndim; k++)"):
            w.line("if (dims[k] <= 0) return 64;")
            with w.block("if (__builtin_mul_overflow(n, (size_t)dims[k], &n) || "
                         "n > SIZE_MAX - 63)"):
                w.line("return SIZE_MAX / 64 * 64;")
        w.line("return (n + 63) / 64 * 64;")


def emit_helper(w: CodeWriter, h: Helper, *, qualifier: str, types: Mapping[DType, str],
                unsigned_types: Mapping[DType, str], libm_suffix: Mapping[DType, str]) -> None:
    """Write the definition of helper ``h`` with a target's spellings.

    >>> w = CodeWriter()
    >>> emit_helper(w, Helper(HelperKind.MAX, DType.INT32), qualifier="static inline",
    ...             types={DType.INT32: "int32_t"}, unsigned_types={}, libm_suffix={})
    >>> print(w.text(), end="")
    static inline int32_t pl_max_i32(int32_t a, int32_t b) {
        return a >= b ? a : b;
    }
    """
    if h.kind is HelperKind.ALLOC_BYTES:
        _emit_alloc_bytes(w, h, qualifier)
        return
    assert h.dtype is not None
    d = h.dtype
    if h.kind is HelperKind.EXP:
        bits = {DType.FLOAT32: "int32_t", DType.FLOAT64: "int64_t"}[d]
        with w.block(f"{qualifier} {types[d]} {h.name}({types[d]} x)"):
            w.lines(exp_scalar_body(d, types[d], bits))
        return
    bodies = _FLOAT_BODIES if d.is_float else _INT_BODIES
    fields = {"T": types[d], "U": unsigned_types.get(d, ""), "f": libm_suffix.get(d, "")}
    with w.block(f"{qualifier} {types[d]} {h.name}({types[d]} a, {types[d]} b)"):
        w.lines(Template(line).substitute(fields) for line in bodies[h.kind])
