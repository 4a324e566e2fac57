# SPDX-License-Identifier: Apache-2.0
"""The bodies of the ``exp`` helpers, vector and scalar: our own range reduction and polynomial.

``exp(x) = 2**k * exp(r)`` with ``k = round(x / ln 2)`` and ``r = x - k ln 2``, ``|r| <= ln(2)/2``.
``k ln 2`` is subtracted in two parts (Cody and Waite: the high part has few enough bits that
``k * hi`` is exact), ``exp(r)`` is its Taylor polynomial (degree 7 for float32, 13 for
float64: truncation error below 0.1 ulp) evaluated by Horner's rule, and ``2**k`` is built in
the exponent field in two halves so that results near overflow and subnormal results come out
right with a single final rounding. The input is clamped first: above the clamp the result is
+inf, below it 0; NaN compares false everywhere and so flows through to a NaN result.
Measured against exp in extended precision on 2 million uniform samples over [-110, 110]
(float32) and [-750, 750] (float64): largest error 0.89 ulp (float32) and 0.87 ulp (float64);
tests/codegen/test_vector_exp.py keeps it at most 1 ulp, special values included. Under
-ffast-math gcc may merge the two parts of ln 2 again: a few ulp (4.5 measured for float32).

With AVX-512 (:func:`exp_body_avx512`) the same method takes fewer instructions: the clamp is
``vmax``/``vmin`` (which return their second operand, ``x``, where it is NaN), ``k`` comes from
``vroundscale`` (round to nearest even, as the magic constant does), and ``vscalef`` multiplies
by ``2**k`` with one rounding, subnormal and overflowing results included (measured the same
way: 0.91 ulp float32, 0.85 ulp float64).

The scalar form (:func:`exp_scalar_body`, C's scalar ``exp`` on the C target) is the same
method in plain C, written so that gcc vectorizes a loop that calls it: glibc's ``expf`` is a
call gcc cannot vectorize (its vector forms are declared only under -ffast-math), so a plain
``B[i] = exp(A[i])`` loop stayed one call per element. The clamp selects through integer
masks (a select on a float comparison stays a branch under -ftrapping-math, and a branch
stops the vectorizer) and ``k`` is read from the bits of ``x / ln 2 + 1.5 * 2**mantissa_bits``
(a float-to-integer conversion may trap, which stops it too). Same accuracy (largest error
0.91 ulp float32, tests/codegen/test_scalar_exp.py).

>>> lines = exp_body(DType.FLOAT32, "v16f", "v16i", "pl_select_v16f", "pl_broadcast_v16f")
>>> lines[-1]
'return p * s1 * s2;'
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..ir.dtypes import DType


@dataclass(frozen=True, slots=True)
class ExpConstants:
    low: float          # below: exp(x) rounds to 0
    high: float         # above: exp(x) overflows to inf
    magic: str          # 1.5 * 2**mantissa_bits: x / ln 2 + magic rounds to an integer
    ln2_hi: str
    ln2_lo: str
    degree: int
    mantissa_bits: int
    bias: int
    suffix: str         # of floating literals


_CONSTANTS = {
    DType.FLOAT32: ExpConstants(-104.0, 89.0, "12582912.0f", "0.693359375f",
                                "-2.12194440054690583e-4f", 7, 23, 127, "f"),
    DType.FLOAT64: ExpConstants(-746.0, 710.0, "6755399441055744.0", "0.693145751953125",
                                "1.42860682030941723212e-6", 13, 52, 1023, ""),
}
LOG2E = "1.44269504088896340736"


def exp_body(dtype: DType, v: str, m: str, select: str, broadcast: str) -> list[str]:
    """C lines of ``v exp(v x)``: ``v`` the float vector type, ``m`` its mask (integer) type."""
    c = _CONSTANTS[dtype]
    f = c.suffix
    terms = [f"{1 / math.factorial(d)!r}{f}" for d in range(c.degree, -1, -1)]
    lines = [
        f"// clamp: exp({c.high:g}) overflows to inf, exp({c.low:g}) rounds to 0; NaN stays NaN",
        f"x = {select}(({m})(x < {c.low:.1f}{f}), {broadcast}({c.low:.1f}{f}), x);",
        f"x = {select}(({m})(x > {c.high:.1f}{f}), {broadcast}({c.high:.1f}{f}), x);",
        f"// k = round(x / ln 2): adding 1.5 * 2^{c.mantissa_bits} leaves k in the low bits",
        f"{v} t = x * {LOG2E}{f} + {c.magic};",
        f"{m} k = ({m})t - ({m}){broadcast}({c.magic});",
        "// k as a float from the integer: t - magic would be folded away by -ffast-math",
        f"{v} kf = __builtin_convertvector(k, {v});",
        "// r = x - k ln 2, with ln 2 in two parts so that k * ln2_hi is exact",
        f"{v} r = x - kf * {c.ln2_hi};",
        f"r = r - kf * {c.ln2_lo};",
        f"// exp(r): Taylor polynomial of degree {c.degree}, Horner's rule",
        f"{v} p = {broadcast}({terms[0]});",
    ]
    lines += [f"p = p * r + {term};" for term in terms[1:]]
    lines += [
        "// 2^k in two halves: each is a normal number even where 2^k is not",
        f"{m} k1 = k >> 1;",
        f"{m} k2 = k - k1;",
        f"{v} s1 = ({v})((k1 + {c.bias}) << {c.mantissa_bits});",
        f"{v} s2 = ({v})((k2 + {c.bias}) << {c.mantissa_bits});",
        "return p * s1 * s2;",
    ]
    return lines


def exp_body_avx512(dtype: DType, v: str, x86: str, prefix: str, suffix: str) -> list[str]:
    """C lines of ``v exp(v x)`` with AVX-512 instructions on ``x86`` (``__m512``) vectors;
    ``prefix``/``suffix`` spell the intrinsics (``_mm512``, ``ps``)."""
    c = _CONSTANTS[dtype]
    f = c.suffix

    def call(op: str, *args: str) -> str:
        return f"{prefix}_{op}_{suffix}({', '.join(args)})"

    def splat(value: str) -> str:
        return call("set1", value)
    terms = [f"{1 / math.factorial(d)!r}{f}" for d in range(c.degree, -1, -1)]
    lines = [
        f"// clamp: exp({c.high:g}) overflows to inf, exp({c.low:g}) rounds to 0; NaN stays NaN",
        f"{x86} y = {call('max', splat(f'{c.low:.1f}{f}'), f'({x86})x')};",
        f"y = {call('min', splat(f'{c.high:.1f}{f}'), 'y')};",
        "// k = round(x / ln 2), to nearest even",
        f"const {x86} k = {call('roundscale', call('mul', 'y', splat(LOG2E + f)), '0x08')};",
        "// r = x - k ln 2, with ln 2 in two parts (each step one fused rounding)",
        f"{x86} r = {call('fnmadd', 'k', splat(c.ln2_hi), 'y')};",
        f"r = {call('fnmadd', 'k', splat(c.ln2_lo), 'r')};",
        f"// exp(r): Taylor polynomial of degree {c.degree}, Horner's rule",
        f"{x86} p = {splat(terms[0])};",
    ]
    lines += [f"p = {call('fmadd', 'p', 'r', splat(term))};" for term in terms[1:]]
    lines += ["// p * 2^k, rounded once",
              f"return ({v}){call('scalef', 'p', 'k')};"]
    return lines


def exp_scalar_body(dtype: DType, f: str, i: str) -> list[str]:
    """C lines of scalar ``f exp(f x)`` (``f`` the float type, ``i`` the signed integer type of
    its width) that gcc can vectorize in a loop around the call (see the module's docstring).

    >>> exp_scalar_body(DType.FLOAT32, "float", "int32_t")[-1]
    'return p * s1 * s2;'
    """
    c = _CONSTANTS[dtype]
    s = c.suffix
    magic_bits = _bits(dtype, float(c.magic.rstrip("f")))
    terms = [f"{1 / math.factorial(d)!r}{s}" for d in range(c.degree, -1, -1)]
    lines = [
        f"// clamp: exp({c.high:g}) overflows to inf, exp({c.low:g}) rounds to 0; NaN stays NaN.",
        "// The selects are on integer masks: a float comparison's select would stay a branch",
        f"const {f} low = {c.low:.1f}{s}, high = {c.high:.1f}{s};",
        f"{i} xb, lb, hb;",
        "__builtin_memcpy(&xb, &x, sizeof xb);",
        "__builtin_memcpy(&lb, &low, sizeof lb);",
        "__builtin_memcpy(&hb, &high, sizeof hb);",
        f"const {i} below = -({i})(x < low), above = -({i})(x > high);",
        "xb = (xb & ~below) | (lb & below);",
        "xb = (xb & ~above) | (hb & above);",
        "__builtin_memcpy(&x, &xb, sizeof x);",
        f"// k = round(x / ln 2): adding 1.5 * 2^{c.mantissa_bits} leaves k in the low bits of t",
        f"const {f} t = x * {LOG2E}{s} + {c.magic};",
        f"{i} tb;",
        "__builtin_memcpy(&tb, &t, sizeof tb);",
        f"const {i} k = tb - ({i}){magic_bits:#x};",
        f"const {f} kf = ({f})k;",
        "// r = x - k ln 2, with ln 2 in two parts so that k * ln2_hi is exact",
        f"{f} r = x - kf * {c.ln2_hi};",
        f"r = r - kf * {c.ln2_lo};",
        f"// exp(r): Taylor polynomial of degree {c.degree}, Horner's rule",
        f"{f} p = {terms[0]};",
    ]
    lines += [f"p = p * r + {term};" for term in terms[1:]]
    lines += [
        "// 2^k in two halves: each is a normal number even where 2^k is not",
        f"const {i} k1 = k >> 1, k2 = k - k1;",
        f"const {i} b1 = (k1 + {c.bias}) << {c.mantissa_bits}, "
        f"b2 = (k2 + {c.bias}) << {c.mantissa_bits};",
        f"{f} s1, s2;",
        "__builtin_memcpy(&s1, &b1, sizeof s1);",
        "__builtin_memcpy(&s2, &b2, sizeof s2);",
        "return p * s1 * s2;",
    ]
    return lines


def _bits(dtype: DType, value: float) -> int:
    """The bits of ``value`` in ``dtype`` (float32 or float64), as an unsigned integer."""
    fmt = ("<f", "<I") if dtype is DType.FLOAT32 else ("<d", "<Q")
    return struct.unpack(fmt[1], struct.pack(fmt[0], value))[0]
