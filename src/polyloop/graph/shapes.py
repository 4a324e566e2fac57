# SPDX-License-Identifier: Apache-2.0
"""Shape and dtype inference: the type of each operator's result from its inputs' types."""
from __future__ import annotations

from collections.abc import Callable

from ..errors import PolyloopError
from .ir import Dim, Op, TensorType
from .shape_util import _fail, broadcast
from .shapes_general import GENERAL_RULES

Attrs = dict[str, object]


def _elementwise(op: Op, types, attrs) -> TensorType:
    return TensorType(broadcast(op, types), types[0].dtype)


def _window(size: Dim, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    if not isinstance(size, int):
        raise PolyloopError(f"a window over a symbolic size {size!r} is not supported; only the "
                            "batch dimension may be symbolic")
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _conv2d(op: Op, types, attrs) -> TensorType:
    x, w = types[0], types[1]
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise _fail(op, types, "conv2d takes NCHW data and (K, C/groups, R, S) weights")
    groups = attrs.get("groups", 1)
    if not isinstance(x.shape[1], int) or x.shape[1] != w.shape[1] * groups:
        raise _fail(op, types, f"data channels must equal weight channels x groups ({groups})")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = _window(x.shape[2], w.shape[2], sh, ph, dh)
    ow = _window(x.shape[3], w.shape[3], sw, pw, dw)
    return TensorType((x.shape[0], w.shape[0], oh, ow), x.dtype)


def _linear(op: Op, types, attrs) -> TensorType:
    x, w = types[0], types[1]
    if len(w.shape) != 2 or x.shape[-1] != w.shape[1]:
        raise _fail(op, types, "linear needs x[..., in] and weight[out, in]")
    return TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)


def _matmul(op: Op, types, attrs) -> TensorType:
    a, b = types
    if len(a.shape) < 2 or len(b.shape) < 2 or a.shape[-1] != b.shape[-2]:
        raise _fail(op, types, "matmul needs a[..., m, k] and b[..., k, n]")
    batch = broadcast(op, (TensorType(a.shape[:-2]), TensorType(b.shape[:-2])))
    return TensorType(batch + (a.shape[-2], b.shape[-1]), a.dtype)


def _pool(op: Op, types, attrs) -> TensorType:
    x = types[0]
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    return TensorType((x.shape[0], x.shape[1], _window(x.shape[2], kh, sh, ph),
                       _window(x.shape[3], kw, sw, pw)), x.dtype)


def _adaptive(op: Op, types, attrs) -> TensorType:
    x = types[0]
    oh, ow = attrs["output_size"]
    return TensorType((x.shape[0], x.shape[1], oh, ow), x.dtype)


def _reshape(op: Op, types, attrs) -> TensorType:
    return TensorType(tuple(attrs["shape"]), types[0].dtype)


def _permute(op: Op, types, attrs) -> TensorType:
    x = types[0]
    return TensorType(tuple(x.shape[a] for a in attrs["axes"]), x.dtype)


def _concat(op: Op, types, attrs) -> TensorType:
    axis = attrs["axis"]
    first = types[0]
    total = 0
    for t in types:
        if len(t.shape) != len(first.shape) or not isinstance(t.shape[axis], int) or any(
                t.shape[k] != first.shape[k] for k in range(len(t.shape)) if k != axis):
            raise _fail(op, types, f"concat needs equal shapes except along constant axis {axis}")
        total += t.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return TensorType(tuple(shape), first.dtype)


def _mean(op: Op, types, attrs) -> TensorType:
    x = types[0]
    axes = attrs["axes"]
    keep = attrs.get("keepdim", False)
    shape = [1 if k in axes else d for k, d in enumerate(x.shape)] if keep else \
        [d for k, d in enumerate(x.shape) if k not in axes]
    return TensorType(tuple(shape), x.dtype)


def _embedding(op: Op, types, attrs) -> TensorType:
    weight, idx = types
    return TensorType(idx.shape + (weight.shape[1],), weight.dtype)


def _select(op: Op, types, attrs) -> TensorType:
    x = types[0]
    axis = attrs["axis"] % len(x.shape)
    return TensorType(x.shape[:axis] + x.shape[axis + 1:], x.dtype)


def _first(op: Op, types, attrs) -> TensorType:
    return types[0]


def _attention(op: Op, types, attrs) -> TensorType:
    q, k, v = types
    if len(q.shape) < 2 or not (len(q.shape) == len(k.shape) == len(v.shape)) \
            or not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) \
            or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise _fail(op, types, "attention needs q[..., s, e], k[..., l, e] and v[..., l, ev] "
                    "with the same leading axes (broadcast them first)")
    return TensorType(q.shape[:-1] + (v.shape[-1],), q.dtype)


RULES: dict[Op, Callable[[Op, tuple, Attrs], TensorType]] = {
    Op.CONV2D: _conv2d, Op.LINEAR: _linear, Op.MATMUL: _matmul,
    Op.MAX_POOL2D: _pool, Op.AVG_POOL2D: _pool, Op.ADAPTIVE_AVG_POOL2D: _adaptive,
    Op.RESHAPE: _reshape, Op.PERMUTE: _permute, Op.CONCAT: _concat, Op.MEAN: _mean,
    Op.EMBEDDING: _embedding, Op.SELECT: _select, Op.ATTENTION: _attention, Op.SOFTMAX: _first,
    Op.LOG_SOFTMAX: _first, Op.LAYER_NORM: _first, Op.BATCH_NORM: _first, Op.COPY: _first,
}
for _op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV):
    RULES[_op] = _elementwise
RULES.update(GENERAL_RULES)
for _op in (Op.RELU, Op.GELU, Op.GELU_TANH, Op.SIGMOID, Op.TANH, Op.SQRT, Op.EXP, Op.NEG, Op.ERF):
    RULES[_op] = _first


def infer(op: Op, types: tuple[TensorType, ...], attrs: Attrs) -> TensorType:
    """The result type of ``op`` applied to values of ``types``.

    >>> from polyloop.graph.ir import Op, TensorType
    >>> print(infer(Op.ADD, (TensorType(("n", 3)), TensorType((3,))), {}))
    float32[n, 3]
    """
    try:
        return RULES[op](op, types, attrs)
    except KeyError as e:       # an attribute the operator needs and has no default for
        if not e.args or not isinstance(e.args[0], str) or e.args[0] in attrs:
            raise
        raise _fail(op, types, f"the attribute {e.args[0]!r} is missing (given: "
                    f"{sorted(attrs) or 'none'})") from None


ATTR_DEFAULTS: dict[Op, dict[str, object]] = {
    Op.CONV2D: {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1},
}
"""Attributes an operator takes when a call leaves them out (PyTorch's and ONNX's defaults);
``GraphBuilder.emit`` fills them in, so every pass reads them."""


def numel(shape: tuple[Dim, ...]) -> int | None:
    """The element count of a shape without size parameters, else None."""
    total = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        total *= d
    return total
