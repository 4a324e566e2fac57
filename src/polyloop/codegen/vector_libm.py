# SPDX-License-Identifier: Apache-2.0
"""Bodies of the vector helpers for C library math: ``sin``, ``cos``, ``tan``, ``erf``, ``log``,
``tanh``, ``pow``, ``floor``, ``ceil``, ``round``, ``fmod``.

Where glibc's libmvec has the function at the vector's width (x86-64: sin, cos, log and pow
since glibc 2.22; tan, erf and tanh since 2.35), the helper calls it: the vector variants
``_ZGV<isa>N<lanes>v_sinf`` of the x86-64 vector function ABI, which gcc itself calls only
under ``-ffast-math``. Their documented accuracy is at most 4 ulp; the tests keep every
function within that against NumPy, special values included. ``floor``, ``ceil`` and
``round`` (to nearest even, as ``rint``) are one rounding instruction where the ISA has it
(SSE4.1 ``roundps``, AVX ``vroundps``, AVX-512 ``vrndscaleps``, exact). Elsewhere, and for
``fmod`` (x86 has no vector remainder), the helper applies the scalar function lane by lane,
exactly as the scalar code does.

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


# the rounding-mode immediate of each rounding function (exceptions suppressed, as in libm)
_ROUNDING = {VectorOp.FLOOR: "_MM_FROUND_TO_NEG_INF", VectorOp.CEIL: "_MM_FROUND_TO_POS_INF",
             VectorOp.ROUND: "_MM_FROUND_TO_NEAREST_INT"}
_X86_FLOAT = {(16, DType.FLOAT32): ("_mm", "ps", "__m128"),
              (16, DType.FLOAT64): ("_mm", "pd", "__m128d"),
              (32, DType.FLOAT32): ("_mm256", "ps", "__m256"),
              (32, DType.FLOAT64): ("_mm256", "pd", "__m256d"),
              (64, DType.FLOAT32): ("_mm512", "ps", "__m512"),
              (64, DType.FLOAT64): ("_mm512", "pd", "__m512d")}
_ROUND_MACRO = {16: "__SSE4_1__", 32: "__AVX__", 64: "__AVX512F__"}


def rounding_call(op: VectorOp, t: VecType, isa: ISA) -> str | None:
    """The x86 rounding instruction's intrinsic applied to ``x``, or None without one."""
    key = (t.bytes, t.dtype)
    if op not in _ROUNDING or key not in _X86_FLOAT or not isa.has(_ROUND_MACRO[t.bytes]):
        return None
    prefix, suffix, x86 = _X86_FLOAT[key]
    what = "roundscale" if t.bytes == 64 else "round"
    return f"({t.name}){prefix}_{what}_{suffix}(({x86})x, {_ROUNDING[op]} | _MM_FROUND_NO_EXC)"


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
    rounded = rounding_call(op, t, isa)
    if rounded is not None:
        return signature, [f"return {rounded};"]
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
