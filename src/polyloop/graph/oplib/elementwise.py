# SPDX-License-Identifier: Apache-2.0
"""Elementwise and broadcasting operators as tensor expressions."""
from __future__ import annotations

from collections.abc import Callable

from ...frontend import te
from ...frontend.te import Tensor
from ...ir.elementwise import abs as abs_, exp, maximum, minimum, sqrt, tanh, where
from ...ir.expr import Expr

# erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, under float32's
# rounding of GELU's result at the magnitudes that matter); only exp is needed.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# exp's argument is kept within +-80 where its result only feeds a sum with 1 (or a product
# that rounds to the same float): exp(-80) is 1.8e-35, below float32's resolution of 1 but a
# normal number, where exp(-100) would be subnormal. Arithmetic on subnormals takes a
# microcode assist (about 100 times slower): a SiLU on activations beyond +-87 cost 13 ms in
# place of 0.5 ms.
_EXP_LIMIT = 80.0


def erf(x: Expr) -> Expr:
    """erf from exp (see the constants above)."""
    ax = abs_(x)
    t = 1.0 / (1.0 + _ERF_P * ax)
    a1, a2, a3, a4, a5 = _ERF_A
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    y = 1.0 - poly * exp(maximum(-(ax * ax), -_EXP_LIMIT))
    return where(x < 0.0, -y, y)


def broadcast_index(t: Tensor, out_ndim: int, idx: tuple) -> tuple:
    """The index of ``t`` read by output element ``idx`` under NumPy broadcasting."""
    lead = out_ndim - t.ndim
    return tuple(0 if str(d) == "1" else idx[lead + k] for k, d in enumerate(t.shape))


def _binary(fn: Callable[[Expr, Expr], Expr]):
    def lower(inputs, attrs, shape, name):
        a, b = inputs
        return te.compute(shape, lambda *i: fn(a[operand_index(a, shape, i)],
                                               b[operand_index(b, shape, i)]), name=name)
    return lower


def operand_index(t: Tensor, shape: tuple, idx: tuple) -> tuple:
    """An operand of the result's shape is read at the result's own index (a unit axis too:
    a consumer read at its own iterators can be inlined into the producer's stores), any other
    as broadcasting says."""
    if [str(d) for d in t.shape] == [str(d) for d in shape]:
        return tuple(idx)
    return broadcast_index(t, len(shape), idx)


def _unary(fn: Callable[[Expr], Expr]):
    def lower(inputs, attrs, shape, name):
        x = inputs[0]
        return te.compute(shape, lambda *i: fn(x[i]), name=name)
    return lower


def sigmoid(v: Expr) -> Expr:
    """``1 / (1 + exp(-v))``, with exp's argument within +-80 (no subnormal is made: beyond
    that, the result differs from the exact one by less than 2e-35)."""
    return 1.0 / (1.0 + exp(minimum(maximum(-v, -_EXP_LIMIT), _EXP_LIMIT)))


def gelu(v: Expr) -> Expr:
    return 0.5 * v * (1.0 + erf(v * 0.7071067811865476))


def gelu_tanh(v: Expr) -> Expr:
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


def batch_norm(inputs, attrs, shape, name):
    """Inference batch norm over axis 1: ``(x - mean) / sqrt(var + eps) * gamma + beta``."""
    x, gamma, beta, mean, var = inputs
    eps = float(attrs.get("eps", 1e-5))
    return te.compute(shape, lambda *i: (x[i] - mean[i[1]]) / sqrt(var[i[1]] + eps)
                      * gamma[i[1]] + beta[i[1]], name=name)


ELEMENTWISE = {
    "add": _binary(lambda a, b: a + b), "sub": _binary(lambda a, b: a - b),
    "mul": _binary(lambda a, b: a * b), "div": _binary(lambda a, b: a / b),
    "relu": _unary(lambda v: maximum(v, 0.0)), "gelu": _unary(gelu),
    "gelu_tanh": _unary(gelu_tanh), "sigmoid": _unary(sigmoid), "tanh": _unary(tanh),
    "sqrt": _unary(sqrt), "exp": _unary(exp), "neg": _unary(lambda v: -v), "erf": _unary(erf),
    "copy": _unary(lambda v: v), "batch_norm": batch_norm,
}
