# SPDX-License-Identifier: Apache-2.0
"""The general elementwise operators as tensor expressions: ``Op.UNARY`` and ``Op.BINARY``
(tables of functions of expressions), ``Op.WHERE`` and ``Op.CAST``.

Functions C's math library has and polyloop's expressions do not (asin, sinh, log1p, ...)
are called as ``pl.extern`` functions of ``<math.h>``; bitwise operators as small C
functions given with their source.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

import numpy as np

from ...frontend import te
from ...ir.dtypes import as_dtype
from ...ir.elementwise import (abs as abs_, ceil, cos, exp, floor, isnan, log, maximum, minimum,
                               pow as pow_, round as round_, sin, sqrt, tan, tanh, where)
from ...ir.elementwise import erf as erf_exact
from ...ir.expr import Expr, cast, const
from ...ir.extern import extern
from ..kinds import BinaryFn, UnaryFn
from .elementwise import broadcast_index, gelu_tanh, operand_index


@functools.cache
def libm(name: str, dtype: str, nargs: int = 1):
    """``name`` of ``<math.h>`` for float64, ``namef`` for float32, as an extern function."""
    suffix = "f" if dtype == "float32" else ""
    ref = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
                       "acosh": "arccosh", "atanh": "arctanh"}.get(name, name))
    return extern(name + suffix, dtype=dtype, args=[dtype] * nargs, header="<math.h>",
                  python=ref)


@functools.cache
def c_binary(symbol: str, label: str, dtype: str):
    """A C operator the expressions lack (``&``, ``<<``) as a small static function."""
    ctype = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t",
             "int64": "int64_t"}[dtype]
    bits = np.dtype(dtype).itemsize * 8
    name = f"pl_{label}_{dtype}"
    if symbol in ("<<", ">>"):
        utype = "u" + ctype if not ctype.startswith("u") else ctype
        body = (f"return (b < 0 || b >= {bits}) ? 0 : "
                f"({ctype})(({utype})a {symbol} b);")
    else:
        body = f"return ({ctype})(a {symbol} b);"
    source = f"static inline {ctype} {name}({ctype} a, {ctype} b) {{ {body} }}"
    ref = {"&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
           "<<": np.left_shift, ">>": np.right_shift}[symbol]
    return extern(name, dtype=dtype, args=[dtype, dtype], source=source, python=ref)


def _float(dtype: str) -> str:
    """The dtype a float function computes in: float32 for the 16-bit floats."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _sigmoid(x: Expr) -> Expr:
    return 1.0 / (1.0 + exp(-x))


def _softplus(x: Expr, dt: str) -> Expr:
    # max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|
    return maximum(x, 0.0) + libm("log1p", dt)(exp(-abs_(x)))


def _expm1(x: Expr, dt: str) -> Expr:
    return libm("expm1", dt)(x)


def _attr(a: dict, key: str, default: float) -> float:
    v = a.get(key)
    return float(default if v is None else v)


def _float_fns() -> dict[UnaryFn, Callable[[Expr, dict, str], Expr]]:
    ext = {f: (lambda n: lambda x, a, dt: libm(n, dt)(x))(f.value) for f in (
        UnaryFn.ASIN, UnaryFn.ACOS, UnaryFn.ATAN, UnaryFn.SINH, UnaryFn.COSH, UnaryFn.ASINH,
        UnaryFn.ACOSH, UnaryFn.ATANH)}
    return {
        **ext,
        UnaryFn.EXP: lambda x, a, dt: exp(x), UnaryFn.LOG: lambda x, a, dt: log(x),
        UnaryFn.SQRT: lambda x, a, dt: sqrt(x), UnaryFn.RECIPROCAL: lambda x, a, dt: 1.0 / x,
        UnaryFn.FLOOR: lambda x, a, dt: floor(x), UnaryFn.CEIL: lambda x, a, dt: ceil(x),
        UnaryFn.ROUND: lambda x, a, dt: round_(x), UnaryFn.SIN: lambda x, a, dt: sin(x),
        UnaryFn.COS: lambda x, a, dt: cos(x), UnaryFn.TAN: lambda x, a, dt: tan(x),
        UnaryFn.TANH: lambda x, a, dt: tanh(x), UnaryFn.ERF: lambda x, a, dt: erf_exact(x),
        UnaryFn.SIGMOID: lambda x, a, dt: _sigmoid(x),
        UnaryFn.SOFTPLUS: lambda x, a, dt: _softplus(x, dt),
        UnaryFn.SOFTSIGN: lambda x, a, dt: x / (1.0 + abs_(x)),
        UnaryFn.ELU: lambda x, a, dt: where(x < 0.0, _attr(a, "alpha", 1.0) * _expm1(x, dt), x),
        UnaryFn.SELU: lambda x, a, dt: _attr(a, "gamma", 1.0507009873554805) * where(
            x <= 0.0, _attr(a, "alpha", 1.6732632423543772) * _expm1(x, dt), x),
        UnaryFn.CELU: lambda x, a, dt: maximum(x, 0.0) + minimum(
            0.0, _attr(a, "alpha", 1.0) * _expm1(x / _attr(a, "alpha", 1.0), dt)),
        UnaryFn.LEAKY_RELU: lambda x, a, dt: where(x < 0.0, _attr(a, "alpha", 0.01) * x, x),
        UnaryFn.HARD_SIGMOID: lambda x, a, dt: maximum(0.0, minimum(
            1.0, _attr(a, "alpha", 0.2) * x + _attr(a, "beta", 0.5))),
        UnaryFn.HARD_SWISH: lambda x, a, dt: x * maximum(0.0, minimum(1.0, x * (1.0 / 6) + 0.5)),
        UnaryFn.SILU: lambda x, a, dt: x * _sigmoid(_attr(a, "alpha", 1.0) * x),
        UnaryFn.MISH: lambda x, a, dt: x * tanh(_softplus(x, dt)),
        UnaryFn.GELU: lambda x, a, dt: 0.5 * x * (1.0 + erf_exact(x * 0.7071067811865476)),
        UnaryFn.GELU_TANH: lambda x, a, dt: gelu_tanh(x),
        UnaryFn.THRESHOLDED_RELU: lambda x, a, dt: where(x > _attr(a, "alpha", 1.0), x, 0.0),
        UnaryFn.SHRINK: lambda x, a, dt: where(
            x < -_attr(a, "lambd", 0.5), x + _attr(a, "bias", 0.0),
            where(x > _attr(a, "lambd", 0.5), x - _attr(a, "bias", 0.0), 0.0)),
        UnaryFn.ISNAN: lambda x, a, dt: isnan(x),
        UnaryFn.ISINF: _isinf,
    }


def _isinf(x: Expr, a: dict, dt: str) -> Expr:
    inf = isnan(x - x) & ~isnan(x)
    pos, neg = a.get("detect_positive", True), a.get("detect_negative", True)
    if pos and not neg:
        return inf & (x > 0.0)
    if neg and not pos:
        return inf & (x < 0.0)
    return inf if pos else inf & (x != x)


def _typed(v: object, dt: str) -> Expr:
    return const(v, dt)


def _sign(x: Expr, dt: str) -> Expr:
    one, zero = _typed(1, dt), _typed(0, dt)
    return where(x > zero, one, where(x < zero, _typed(-1, dt), zero))


def _clip(x: Expr, a: dict, dt: str) -> Expr:
    lo, hi = a.get("lo"), a.get("hi")
    if lo is not None:
        x = maximum(x, _typed(lo, dt))
    if hi is not None:
        x = minimum(x, _typed(hi, dt))
    return x


_ANY_FNS: dict[UnaryFn, Callable[[Expr, dict, str], Expr]] = {
    UnaryFn.ABS: lambda x, a, dt: abs_(x) if dt not in ("int8", "uint8", "int16")
    else where(x < _typed(0, dt), -x, x),
    UnaryFn.NEG: lambda x, a, dt: -x,
    UnaryFn.SIGN: lambda x, a, dt: _sign(x, dt),
    UnaryFn.RELU: lambda x, a, dt: maximum(x, _typed(0, dt)),
    UnaryFn.CLIP: _clip,
    UnaryFn.NOT: lambda x, a, dt: ~x,
    UnaryFn.BITWISE_NOT: lambda x, a, dt: -x - _typed(1, dt),
}
_FLOAT_FNS = _float_fns()


def unary_expr(fn: UnaryFn, x: Expr, attrs: dict, dtype: str) -> Expr:
    """``fn`` applied to ``x`` of ``dtype`` (16-bit floats computed in float32)."""
    if fn in _ANY_FNS and (dtype not in ("float16", "bfloat16") or fn is not UnaryFn.CLIP):
        return cast(as_dtype(dtype), _ANY_FNS[fn](x, attrs, dtype))
    dt = _float(dtype)
    if fn in _ANY_FNS:
        out = _ANY_FNS[fn](cast(as_dtype(dt), x), attrs, dt)
    else:
        out = _FLOAT_FNS[fn](cast(as_dtype(dt), x), attrs, dt)
    return out if out.dtype.value == "bool" else cast(as_dtype(dtype), out)


def lower_unary(inputs, attrs, shape, name):
    x = inputs[0]
    fn, dtype = attrs["fn"], str(x.dtype)
    return te.compute(shape, lambda *i: unary_expr(fn, x[i], attrs, dtype), name=name)


def _int_div(a: Expr, b: Expr, dt: str) -> Expr:
    q, r = a // b, a % b       # floor division and remainder, both 0 for b == 0
    zero = _typed(0, dt)
    return where((r != zero) & ((a < zero) != (b < zero)), q + _typed(1, dt), q)


def _int_fmod(a: Expr, b: Expr, dt: str) -> Expr:
    r, zero = a % b, _typed(0, dt)
    return where((r != zero) & ((a < zero) != (b < zero)), r - b, r)


def _pow(a: Expr, b: Expr, dt: str) -> Expr:
    if dt in ("float32", "float64"):
        return pow_(a, cast(as_dtype(dt), b))
    return cast(as_dtype(dt), pow_(cast(as_dtype("float64"), a), cast(as_dtype("float64"), b)))


def _is_float(dt: str) -> bool:
    return dt in ("float16", "bfloat16", "float32", "float64")


_BINARY: dict[BinaryFn, Callable[[Expr, Expr, str], Expr]] = {
    BinaryFn.ADD: lambda a, b, dt: a + b, BinaryFn.SUB: lambda a, b, dt: a - b,
    BinaryFn.MUL: lambda a, b, dt: a * b,
    BinaryFn.DIV: lambda a, b, dt: a / b if _is_float(dt) else _int_div(a, b, dt),
    BinaryFn.POW: _pow,
    BinaryFn.MAX: lambda a, b, dt: maximum(a, b), BinaryFn.MIN: lambda a, b, dt: minimum(a, b),
    BinaryFn.MOD: lambda a, b, dt: a % b,
    BinaryFn.FMOD: lambda a, b, dt: libm("fmod", dt, 2)(a, b) if _is_float(dt)
    else _int_fmod(a, b, dt),
    BinaryFn.AND: lambda a, b, dt: a & b, BinaryFn.OR: lambda a, b, dt: a | b,
    BinaryFn.XOR: lambda a, b, dt: a != b,
    BinaryFn.EQ: lambda a, b, dt: a == b, BinaryFn.NE: lambda a, b, dt: a != b,
    BinaryFn.LT: lambda a, b, dt: a < b, BinaryFn.LE: lambda a, b, dt: a <= b,
    BinaryFn.GT: lambda a, b, dt: a > b, BinaryFn.GE: lambda a, b, dt: a >= b,
    BinaryFn.BITAND: lambda a, b, dt: c_binary("&", "and", dt)(a, b),
    BinaryFn.BITOR: lambda a, b, dt: c_binary("|", "or", dt)(a, b),
    BinaryFn.BITXOR: lambda a, b, dt: c_binary("^", "xor", dt)(a, b),
    BinaryFn.SHIFT_LEFT: lambda a, b, dt: c_binary("<<", "shl", dt)(a, b),
    BinaryFn.SHIFT_RIGHT: lambda a, b, dt: c_binary(">>", "shr", dt)(a, b),
    BinaryFn.PRELU: lambda a, b, dt: where(a < _typed(0, dt), a * b, a),
}


def binary_expr(fn: BinaryFn, a: Expr, b: Expr, dtype: str) -> Expr:
    """``fn(a, b)`` of operands of ``dtype`` (16-bit floats computed in float32)."""
    dt = _float(dtype)
    if dt != dtype:
        a, b = cast(as_dtype(dt), a), cast(as_dtype(dt), b)
    out = _BINARY[fn](a, b, dt)
    return out if fn.is_comparison or out.dtype.value == "bool" else cast(as_dtype(dtype), out)


def lower_binary(inputs, attrs, shape, name):
    a, b = inputs
    fn, dtype = attrs["fn"], str(a.dtype)
    return te.compute(shape, lambda *i: binary_expr(fn, a[operand_index(a, shape, i)],
                                                    b[operand_index(b, shape, i)], dtype),
                      name=name)


def lower_where(inputs, attrs, shape, name):
    c, a, b = inputs
    n = len(shape)
    return te.compute(shape, lambda *i: where(c[broadcast_index(c, n, i)],
                                              a[broadcast_index(a, n, i)],
                                              b[broadcast_index(b, n, i)]), name=name)


def lower_cast(inputs, attrs, shape, name):
    x = inputs[0]
    d = as_dtype(attrs["dtype"])
    return te.compute(shape, lambda *i: cast(d, x[i]), name=name)


_C_TYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t",
            "int64": "int64_t", "float16": "_Float16", "float32": "float", "float64": "double"}


@functools.cache
def c_bitcast(src: str, dst: str):
    """The bits of a ``src`` value read as ``dst`` (a union: no aliasing rule broken)."""
    a, b = _C_TYPES[src], _C_TYPES[dst]
    name = f"pl_bitcast_{src}_{dst}"
    source = (f"static inline {b} {name}({a} x) {{ union {{ {a} from; {b} to; }} u; "
              f"u.from = x; return u.to; }}")
    return extern(name, dtype=dst, args=[src], source=source,
                  python=lambda v: np.array(v, src).view(dst)[()])


def lower_bitcast(inputs, attrs, shape, name):
    x = inputs[0]
    f = c_bitcast(str(x.dtype), str(attrs["dtype"]))
    return te.compute(shape, lambda *i: f(x[i]), name=name)


def _permutations(n: int) -> list[tuple[tuple[int, ...], int]]:
    """Every permutation of range(n) with its sign."""
    out = []
    for p in itertools.permutations(range(n)):
        inversions = sum(1 for i in range(n) for j in range(i + 1, n) if p[i] > p[j])
        out.append((p, -1 if inversions % 2 else 1))
    return out


def lower_det(inputs, attrs, shape, name):
    """The determinant by Leibniz's formula (every permutation's signed product)."""
    x = inputs[0]
    n = int(x.shape[-1].value)

    def body(*i):
        total = None
        for p, sign in _permutations(n):
            term = x[i + (0, p[0])]
            for r in range(1, n):
                term = term * x[i + (r, p[r])]
            total = (term if sign > 0 else -term) if total is None else \
                (total + term if sign > 0 else total - term)
        return total
    return te.compute(shape, body, name=name)


MATH = {"unary": lower_unary, "binary": lower_binary, "where": lower_where, "cast": lower_cast,
        "bitcast": lower_bitcast, "det": lower_det}
