# SPDX-License-Identifier: Apache-2.0
"""Elementwise ATen operators: arithmetic, comparisons, ``where``, casts and activations.

Float ``+ - * /`` and the activations the fusion passes know (relu, sigmoid, tanh, gelu...)
map onto the graph's specific operators; everything else onto ``Op.UNARY``/``Op.BINARY``.
Operands are cast to the dtype PyTorch's type promotion gives (``torch.result_type``).
"""
from __future__ import annotations

from ..ir import Op, Value
from ..kinds import BinaryFn, UnaryFn
from .context import Call, Unsupported

_FLOATS = ("float16", "float32", "float64")
_SPECIFIC_UNARY = {"relu": Op.RELU, "sigmoid": Op.SIGMOID, "tanh": Op.TANH, "exp": Op.EXP,
                   "sqrt": Op.SQRT, "neg": Op.NEG, "erf": Op.ERF}
_SPECIFIC_BINARY = {BinaryFn.ADD: Op.ADD, BinaryFn.SUB: Op.SUB, BinaryFn.MUL: Op.MUL,
                    BinaryFn.DIV: Op.DIV}
_UNARY = {"abs": UnaryFn.ABS, "log": UnaryFn.LOG, "reciprocal": UnaryFn.RECIPROCAL,
          "floor": UnaryFn.FLOOR, "ceil": UnaryFn.CEIL, "round": UnaryFn.ROUND,
          "sign": UnaryFn.SIGN, "sin": UnaryFn.SIN, "cos": UnaryFn.COS, "tan": UnaryFn.TAN,
          "asin": UnaryFn.ASIN, "acos": UnaryFn.ACOS, "atan": UnaryFn.ATAN,
          "sinh": UnaryFn.SINH, "cosh": UnaryFn.COSH, "asinh": UnaryFn.ASINH,
          "acosh": UnaryFn.ACOSH, "atanh": UnaryFn.ATANH, "logical_not": UnaryFn.NOT,
          "isnan": UnaryFn.ISNAN, "mish": UnaryFn.MISH, "silu": UnaryFn.SILU,
          "hardswish": UnaryFn.HARD_SWISH, "bitwise_not": UnaryFn.BITWISE_NOT}
_BINARY = {"add": BinaryFn.ADD, "sub": BinaryFn.SUB, "mul": BinaryFn.MUL, "div": BinaryFn.DIV,
           "maximum": BinaryFn.MAX, "minimum": BinaryFn.MIN, "fmod": BinaryFn.FMOD,
           "remainder": BinaryFn.MOD, "eq": BinaryFn.EQ, "ne": BinaryFn.NE, "lt": BinaryFn.LT,
           "le": BinaryFn.LE, "gt": BinaryFn.GT, "ge": BinaryFn.GE,
           "logical_and": BinaryFn.AND, "logical_or": BinaryFn.OR,
           "logical_xor": BinaryFn.XOR, "bitwise_and": BinaryFn.BITAND,
           "bitwise_or": BinaryFn.BITOR, "bitwise_xor": BinaryFn.BITXOR, "pow": BinaryFn.POW}


def cast(c: Call, v: Value, dtype: str, hint: str = "cast") -> Value:
    """``v`` converted to ``dtype`` (itself when it has it)."""
    if v.type.dtype == dtype:
        return v
    return c.emit(Op.CAST, v, dtype=dtype, name=f"{c.name}_{hint}")


def _promoted(c: Call, *ks: int) -> tuple[str, list[Value]]:
    """The dtype PyTorch computes arguments ``ks`` in, and them as values of it."""
    args = [c.arg(k) for k in ks]
    dtype = c.importer.result_type(args)
    return dtype, [cast(c, c.importer.as_value(a, dtype), dtype, f"in{k}")
                   for k, a in zip(ks, args)]


def unary(name: str):
    op = _SPECIFIC_UNARY.get(name)
    fn = _UNARY.get(name)

    def convert(c: Call) -> Value:
        x = c.value(0)
        out = c.out_type().dtype
        if out in _FLOATS and x.type.dtype != out:
            x = cast(c, x, out)
        if op is not None and out in _FLOATS:
            return c.emit(op, x)
        return c.emit(Op.UNARY, x, fn=fn or UnaryFn(name))
    return convert


def binary(name: str):
    fn = _BINARY[name]

    def convert(c: Call) -> Value:
        dtype, (a, b) = _promoted(c, 0, 1)
        alpha = c.arg(2, "alpha", 1) if fn in (BinaryFn.ADD, BinaryFn.SUB) else 1
        if alpha != 1:
            b = c.emit(Op.BINARY, b, c.constant(alpha, dtype), fn=BinaryFn.MUL,
                       name=f"{c.name}_alpha")
        if fn is BinaryFn.DIV:
            return _divide(c, a, b)
        if fn in _SPECIFIC_BINARY and dtype in _FLOATS:
            return c.emit(_SPECIFIC_BINARY[fn], a, b)
        return c.emit(Op.BINARY, a, b, fn=fn)
    return convert


def _divide(c: Call, a: Value, b: Value) -> Value:
    """``div`` with PyTorch's rounding modes: true division (integers to float), or rounded
    toward zero or down."""
    mode = c.arg(2, "rounding_mode")
    out = c.out_type().dtype
    if mode is None:
        a, b = cast(c, a, out, "a"), cast(c, b, out, "b")
        return c.emit(Op.DIV, a, b)
    if a.type.dtype not in _FLOATS and mode == "trunc":
        return c.emit(Op.BINARY, a, b, fn=BinaryFn.DIV)
    if mode not in ("trunc", "floor"):
        raise Unsupported(f"div with rounding_mode={mode!r}")
    fa, fb = cast(c, a, "float64", "a"), cast(c, b, "float64", "b")
    q = c.emit(Op.DIV, fa, fb, name=f"{c.name}_q")
    if mode == "floor":
        q = c.emit(Op.UNARY, q, fn=UnaryFn.FLOOR, name=f"{c.name}_floor")
    else:
        mag = c.emit(Op.UNARY, c.emit(Op.UNARY, q, fn=UnaryFn.ABS, name=f"{c.name}_abs"),
                     fn=UnaryFn.FLOOR, name=f"{c.name}_floor")
        q = c.emit(Op.MUL, mag, c.emit(Op.UNARY, q, fn=UnaryFn.SIGN, name=f"{c.name}_sign"),
                   name=f"{c.name}_trunc")
    return cast(c, q, out, "out")


def rsub(c: Call) -> Value:
    dtype, (x, other) = _promoted(c, 0, 1)
    alpha = c.arg(2, "alpha", 1)
    if alpha != 1:
        x = c.emit(Op.BINARY, x, c.constant(alpha, dtype), fn=BinaryFn.MUL, name=f"{c.name}_a")
    return c.emit(Op.SUB if dtype in _FLOATS else Op.BINARY, other, x,
                  **({} if dtype in _FLOATS else {"fn": BinaryFn.SUB}))


def where(c: Call) -> Value:
    cond = cast(c, c.value(0, dtype="bool"), "bool", "cond")
    dtype = c.out_type().dtype
    a, b = (cast(c, c.importer.as_value(c.arg(k), dtype), dtype, f"in{k}") for k in (1, 2))
    return c.emit(Op.WHERE, cond, a, b)


def to_copy(c: Call) -> Value:
    """``_to_copy``/``to``: a copy in another dtype (memory format and device ignored: the
    graph has one layout and one device)."""
    return cast(c, c.value(0), c.out_type().dtype)


def gelu(c: Call) -> Value:
    tanh = c.arg(1, "approximate", "none") == "tanh"
    return c.emit(Op.GELU_TANH if tanh else Op.GELU, c.value(0))


def clamp(c: Call) -> Value:
    """clamp/clamp_min/clamp_max/hardtanh with numbers; with tensor bounds, max then min."""
    name = c.node.target.__name__.split(".")[0]
    x = c.value(0)
    lo = c.arg(1) if name in ("clamp", "clamp_min", "hardtanh") else None
    hi = c.arg(2 if name in ("clamp", "hardtanh") else 1) if name != "clamp_min" else None
    if name == "hardtanh":
        lo, hi = c.arg(1, "min_val", -1.0), c.arg(2, "max_val", 1.0)
    if isinstance(lo, Value) or isinstance(hi, Value) or c.importer.is_constant(lo) \
            or c.importer.is_constant(hi):
        out = x
        for bound, fn in ((lo, BinaryFn.MAX), (hi, BinaryFn.MIN)):
            if bound is not None:
                out = c.emit(Op.BINARY, out, cast(c, c.importer.as_value(bound, x.type.dtype),
                                                  x.type.dtype), fn=fn)
        return out
    if lo is not None and hi is None and lo == 0 and x.type.dtype in _FLOATS:
        return c.emit(Op.RELU, x)
    return c.emit(Op.UNARY, x, fn=UnaryFn.CLIP, lo=lo, hi=hi)


def activation(fn: UnaryFn, **defaults: tuple[int, str, float]):
    """An activation whose parameters are arguments: ``defaults`` maps an attribute to the
    argument's position, name and default."""
    def convert(c: Call) -> Value:
        attrs = {key: float(c.arg(k, arg, d)) for key, (k, arg, d) in defaults.items()}
        return c.emit(Op.UNARY, c.value(0), fn=fn, **attrs)
    return convert


def elu(c: Call) -> Value:
    if c.arg(2, "scale", 1) != 1 or c.arg(3, "input_scale", 1) != 1:
        raise Unsupported("elu with scale or input_scale")
    return c.emit(Op.UNARY, c.value(0), fn=UnaryFn.ELU, alpha=float(c.arg(1, "alpha", 1.0)))


def softplus(c: Call) -> Value:
    if c.arg(1, "beta", 1) != 1:
        raise Unsupported("softplus with beta other than 1")
    return c.emit(Op.UNARY, c.value(0), fn=UnaryFn.SOFTPLUS)


def hardsigmoid(c: Call) -> Value:
    return c.emit(Op.UNARY, c.value(0), fn=UnaryFn.HARD_SIGMOID, alpha=1 / 6, beta=0.5)


def rsqrt(c: Call) -> Value:
    root = c.emit(Op.SQRT, cast(c, c.value(0), c.out_type().dtype), name=f"{c.name}_sqrt")
    return c.emit(Op.UNARY, root, fn=UnaryFn.RECIPROCAL)


MATH = {
    **{name: unary(name) for name in (*_SPECIFIC_UNARY, *_UNARY)},
    **{name: binary(name) for name in _BINARY},
    "rsub": rsub, "where": where, "_to_copy": to_copy, "to": to_copy, "gelu": gelu,
    "clamp": clamp, "clamp_min": clamp, "clamp_max": clamp, "hardtanh": clamp, "elu": elu,
    "leaky_relu": activation(UnaryFn.LEAKY_RELU, alpha=(1, "negative_slope", 0.01)),
    "softplus": softplus, "hardsigmoid": hardsigmoid, "rsqrt": rsqrt,
}
