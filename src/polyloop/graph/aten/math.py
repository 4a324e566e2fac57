# SPDX-License-Identifier: Apache-2.0
"""Elementwise ATen operators: arithmetic, activations and their decompositions onto the graph
IR's operators."""
from __future__ import annotations

from ..ir import Op, Value
from .context import Call, Unsupported

_UNARY = {"relu": Op.RELU, "sigmoid": Op.SIGMOID, "tanh": Op.TANH, "exp": Op.EXP,
          "sqrt": Op.SQRT, "neg": Op.NEG, "erf": Op.ERF}
_BINARY = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "div": Op.DIV}


def _float(c: Call) -> None:
    if not c.out_type().dtype.startswith("float"):
        raise Unsupported(f"{c.node.target} on {c.out_type().dtype} tensors")


def unary(op: Op):
    def convert(c: Call) -> Value:
        _float(c)
        return c.emit(op, c.value(0))
    return convert


def binary(op: Op):
    def convert(c: Call) -> Value:
        _float(c)
        if op is Op.DIV and c.arg(2, "rounding_mode") is not None:
            raise Unsupported("div with a rounding mode")
        other = c.value(1)
        alpha = c.arg(2, "alpha", 1)
        if op in (Op.ADD, Op.SUB) and alpha != 1:
            other = c.emit(Op.MUL, other, c.constant(alpha, other.type.dtype),
                           name=f"{c.name}_alpha")
        return c.emit(op, c.value(0), other)
    return convert


def rsub(c: Call) -> Value:
    _float(c)
    x, other = c.value(0), c.value(1)
    alpha = c.arg(2, "alpha", 1)
    if alpha != 1:
        x = c.emit(Op.MUL, x, c.constant(alpha, x.type.dtype), name=f"{c.name}_alpha")
    return c.emit(Op.SUB, other, x)


def gelu(c: Call) -> Value:
    _float(c)
    tanh = c.arg(1, "approximate", "none") == "tanh"
    return c.emit(Op.GELU_TANH if tanh else Op.GELU, c.value(0))


def silu(c: Call) -> Value:
    _float(c)
    x = c.value(0)
    return c.emit(Op.MUL, x, c.emit(Op.SIGMOID, x, name=f"{c.name}_sigmoid"))


def rsqrt(c: Call) -> Value:
    _float(c)
    root = c.emit(Op.SQRT, c.value(0), name=f"{c.name}_sqrt")
    return c.emit(Op.DIV, c.constant(1.0, root.type.dtype), root)


def pow_scalar(c: Call) -> Value:
    _float(c)
    x, e = c.value(0), c.arg(1, "exponent")
    if e == 2:
        return c.emit(Op.MUL, x, x)
    if e == 0.5:
        return c.emit(Op.SQRT, x)
    if e == 3:
        return c.emit(Op.MUL, x, c.emit(Op.MUL, x, x, name=f"{c.name}_sq"))
    if e == 1:
        return c.emit(Op.COPY, x)
    raise Unsupported(f"pow with exponent {e!r} (the graph has no general power yet)")


MATH = {
    **{name: unary(op) for name, op in _UNARY.items()},
    **{name: binary(op) for name, op in _BINARY.items()},
    "rsub": rsub, "gelu": gelu, "silu": silu, "rsqrt": rsqrt, "pow": pow_scalar,
}
