# SPDX-License-Identifier: Apache-2.0
"""Bodies of the vector helpers for C library math: ``sin``, ``cos``, ``tan``, ``erf``, ``log``,
``tanh``, ``pow``, ``floor``, ``ceil``, ``round``, ``fmod``.

Where glibc's libmvec has the function at the vector's width (x86-64: sin, cos, log and pow
since glibc 2.22; tan, erf and tanh since 2.35), the helper calls it: the vector variants
``_ZGV<isa>N<lanes>v_sinf`` of the x86-64 vector function ABI, which gcc itself calls only
under ``-ffast-math``. Their documented accuracy is at most 4 ulp; the tests keep every
function within that against NumPy, special values included. Elsewhere, and for ``floor``,
``ceil``, ``round`` (rint) and ``fmod``, the helper applies the scalar function lane by lane:
exact as the scalar code, and gcc turns the lane loop of ``floor``/``ceil``/``rint`` into one
rounding instruction where the ISA has it (SSE4.1 ``roundps``, AVX-512 ``vrndscaleps``).
x86 has no vector remainder: ``fmod`` stays lane by lane.

>>> from polyloop.util.isa import ISA
>>> avx2 = ISA("avx2", 32, True, frozenset({"__x86_64__", "__AVX__", "__AVX2__"}), (2, 36))
>>> libmvec_symbol(VectorOp.SIN, VecType(DType.FLOAT32, 8), avx2)
'_ZGVdN8v_sinf'
>>> libmvec_symbol(VectorOp.POW, VecType(DType.FLOAT64, 4), avx2)
'_ZGVdN4vv_pow'
"""
from __future__ import annotations

from ..ir.dtypes import DType
from ..util.isa import ISA
from .vector_types import VecType, VectorOp

# the C library function of each helper (float32 adds the 'f' suffix)
LIBM_FUNCTIONS = {VectorOp.SIN: "sin", VectorOp.COS: "cos", VectorOp.TAN: "tan",
                  VectorOp.ERF: "erf", VectorOp.LOG: "log", VectorOp.TANH: "tanh",
                  VectorOp.FLOOR: "floor", VectorOp.CEIL: "ceil", VectorOp.ROUND: "rint",
                  VectorOp.POW: "pow", VectorOp.FMOD: "fmod"}
BINARY = frozenset({VectorOp.POW, VectorOp.FMOD})
# the first glibc whose libmvec has the function
_LIBMVEC_SINCE = {VectorOp.SIN: (2, 22), VectorOp.COS: (2, 22), VectorOp.LOG: (2, 22),
                  VectorOp.POW: (2, 22), VectorOp.TAN: (2, 35), VectorOp.ERF: (2, 35),
                  VectorOp.TANH: (2, 35)}


def _abi_letter(isa: ISA, vector_bytes: int) -> str | None:
    """The ISA letter of the x86-64 vector function ABI for vectors of this size."""
    if not isa.has("__x86_64__"):
        return None
    if vector_bytes == 64 and isa.has("__AVX512F__"):
        return "e"
    if vector_bytes == 32:
        return "d" if isa.has("__AVX2__") else "c" if isa.has("__AVX__") else None
    return "b" if vector_bytes == 16 and isa.has("__SSE2__") else None


def libmvec_symbol(op: VectorOp, t: VecType, isa: ISA) -> str | None:
    """libmvec's function for ``op`` on vectors of type ``t``, or None where it has none."""
    since = _LIBMVEC_SINCE.get(op)
    if since is None or isa.glibc is None or isa.glibc < since or not t.dtype.is_float:
        return None
    letter = _abi_letter(isa, t.bytes)
    if letter is None:
        return None
    params = "vv" if op in BINARY else "v"
    suffix = "f" if t.dtype is DType.FLOAT32 else ""
    return f"_ZGV{letter}N{t.lanes}{params}_{LIBM_FUNCTIONS[op]}{suffix}"


def libm_helper(op: VectorOp, t: VecType, isa: ISA, name: str) -> tuple[str, list[str]]:
    """The signature and body of helper ``name``: ``op`` on each lane of vectors ``t``."""
    v = t.name
    binary = op in BINARY
    signature = f"{v} {name}({v} x, {v} y)" if binary else f"{v} {name}({v} x)"
    args = "x, y" if binary else "x"
    symbol = libmvec_symbol(op, t, isa)
    if symbol is not None:
        params = f"{v}, {v}" if binary else v
        return signature, [f"extern {v} {symbol}({params});  // glibc's libmvec",
                           f"return {symbol}({args});"]
    scalar = LIBM_FUNCTIONS[op] + ("f" if t.dtype is DType.FLOAT32 else "")
    lanes = "x[l], y[l]" if binary else "x[l]"
    return signature, [f"{v} r;",
                       f"for (int l = 0; l < {t.lanes}; l++) r[l] = {scalar}({lanes});",
                       "return r;"]
