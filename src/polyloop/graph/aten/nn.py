# SPDX-License-Identifier: Apache-2.0
"""Neural-network ATen operators: convolution, dense layers, pooling, normalisation, softmax,
embedding and attention."""
from __future__ import annotations

import numpy as np

from ..ir import Op, Value
from .context import Call, Unsupported, normalize_axis


def _ints(v: object, n: int) -> tuple[int, ...]:
    vals = [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)]
    if len(vals) == 1:
        vals *= n
    if len(vals) != n:
        raise Unsupported(f"expected {n} values, got {vals}")
    return tuple(vals)


def convolution(c: Call) -> Value:
    """``aten.convolution(x, w, bias, stride, padding, dilation, transposed, output_padding,
    groups)``."""
    x, w = c.value(0), c.value(1)
    nd = len(w.type.shape) - 2
    if c.arg(6, "transposed") or nd != 2:
        raise Unsupported(f"{'transposed ' if c.arg(6, 'transposed') else ''}{nd}-D "
                          "convolution (the graph has 2-D convolution only)")
    ins = [x, w] + ([c.value(2)] if c.has(2, "bias") else [])
    return c.emit(Op.CONV2D, *ins, stride=_ints(c.arg(3), 2), padding=_ints(c.arg(4), 2),
                  dilation=_ints(c.arg(5), 2), groups=int(c.arg(8, "groups", 1)))


def linear(c: Call) -> Value:
    ins = [c.value(0), c.value(1)] + ([c.value(2)] if c.has(2, "bias") else [])
    return c.emit(Op.LINEAR, *ins)


def addmm(c: Call) -> Value:
    """``beta * bias + alpha * (x @ w)``: a dense layer (weights ``w.T``) when ``w`` is a
    constant, else a product and a sum."""
    if c.arg(3, "beta", 1) != 1 or c.arg(4, "alpha", 1) != 1:
        raise Unsupported("addmm with alpha or beta other than 1")
    bias, x, w = c.arg(0), c.value(1), c.arg(2)
    if c.importer.is_constant(w) and len(c.value(0).type.shape) == 1:
        wt = c.importer.constant_value(np.ascontiguousarray(c.importer.array(w).T),
                                       f"{c.name}_weight")
        return c.emit(Op.LINEAR, x, wt, c.value(0))
    prod = c.emit(Op.MATMUL, x, c.value(2), name=f"{c.name}_mm")
    return c.emit(Op.ADD, prod, c.importer.as_value(bias, prod.type.dtype))


def matmul(c: Call) -> Value:
    a, b = c.value(0), c.value(1)
    if len(a.type.shape) < 2 or len(b.type.shape) < 2:
        raise Unsupported("matmul of a vector")
    return c.emit(Op.MATMUL, a, b)


def softmax(c: Call) -> Value:
    x = c.value(0)
    if c.arg(2) not in (None, False) and c.node.target.__name__.startswith("softmax"):
        raise Unsupported("softmax with a dtype")
    op = Op.LOG_SOFTMAX if "log" in c.node.target.__name__ else Op.SOFTMAX
    return c.emit(op, x, axis=normalize_axis(int(c.arg(1, "dim")), len(x.type.shape), "dim"))


def _pool_attrs(c: Call, kind: str) -> dict:
    x = c.value(0)
    if len(x.type.shape) != 4:
        raise Unsupported(f"{kind} pooling of a rank-{len(x.type.shape)} tensor (the graph "
                          "pools NCHW images)")
    kernel = _ints(c.arg(1, "kernel_size"), 2)
    stride = _ints(c.arg(2, "stride") or kernel, 2)
    padding = _ints(c.arg(3, "padding", 0), 2)
    ceil = c.arg(5 if kind == "max" else 4, "ceil_mode", False)
    if ceil:
        raise Unsupported(f"{kind} pooling with ceil_mode")
    return {"kernel": kernel, "stride": stride, "padding": padding}


def max_pool2d(c: Call) -> tuple:
    attrs = _pool_attrs(c, "max")
    if _ints(c.arg(4, "dilation", 1), 2) != (1, 1):
        raise Unsupported("max pooling with dilation")
    return c.emit(Op.MAX_POOL2D, c.value(0), **attrs), None


def avg_pool2d(c: Call) -> Value:
    attrs = _pool_attrs(c, "avg")
    if c.arg(6, "divisor_override") is not None:
        raise Unsupported("average pooling with divisor_override")
    return c.emit(Op.AVG_POOL2D, c.value(0), count_include_pad=bool(
        c.arg(5, "count_include_pad", True)), **attrs)


def adaptive_avg_pool2d(c: Call) -> Value:
    x = c.value(0)
    out = _ints(c.arg(1, "output_size"), 2)
    h, w = x.type.shape[2], x.type.shape[3]
    if not (isinstance(h, int) and isinstance(w, int)) or h % out[0] or w % out[1]:
        raise Unsupported(f"adaptive average pooling of {h}x{w} to {out[0]}x{out[1]} (windows "
                          "of unequal size)")
    return c.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=out)


def batch_norm(c: Call) -> tuple:
    """``_native_batch_norm_legit_no_training(x, weight, bias, mean, var, momentum, eps)``."""
    x = c.value(0)
    if not (c.has(1) and c.has(2)):
        raise Unsupported("batch norm without weight or bias")
    out = c.emit(Op.BATCH_NORM, x, c.value(1), c.value(2), c.value(3), c.value(4),
                 eps=float(c.arg(6, "eps", 1e-5)))
    return out, None, None


def layer_norm(c: Call) -> object:
    """``layer_norm(x, shape, weight, bias, eps)`` and ``native_layer_norm`` (whose mean and
    rstd results are not computed: nothing in an inference graph reads them)."""
    x = c.value(0)
    ndims = len(c.arg(1, "normalized_shape"))
    if not (c.has(2) and c.has(3)):
        raise Unsupported("layer norm without weight or bias")
    out = c.emit(Op.LAYER_NORM, x, c.value(2), c.value(3), ndims=ndims,
                 eps=float(c.arg(4, "eps", 1e-5)))
    if c.node.target.__name__.startswith("native"):
        if any(getattr(u.target, "__name__", "") == "getitem" and u.args[1] in (1, 2)
               for u in c.node.users):
            raise Unsupported("native_layer_norm whose mean or rstd is used")
        return out, None, None
    return out


def mean(c: Call) -> Value:
    x = c.value(0)
    if c.arg(3, "dtype") is not None:
        raise Unsupported("mean with a dtype")
    rank = len(x.type.shape)
    dims = c.arg(1, "dim") or list(range(rank))
    axes = sorted(normalize_axis(int(d), rank, "dim") for d in dims)
    return c.emit(Op.MEAN, x, axes=axes, keepdim=bool(c.arg(2, "keepdim", False)))


def embedding(c: Call) -> Value:
    if c.arg(2, "padding_idx", -1) not in (-1, None) and c.arg(4, "sparse", False):
        raise Unsupported("sparse embedding")
    weight, idx = c.value(0), c.value(1)
    if idx.type.dtype not in ("int64", "int32"):
        raise Unsupported(f"embedding with {idx.type.dtype} indices")
    return c.emit(Op.EMBEDDING, weight, idx)


def attention(c: Call) -> Value:
    """``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
    enable_gqa)`` without a mask and with as many key as query heads."""
    q, k, v = c.value(0), c.value(1), c.value(2)
    if c.has(3, "attn_mask"):
        raise Unsupported("attention with a mask")
    if c.arg(4, "dropout_p", 0.0):
        raise Unsupported("attention with dropout")
    if q.type.shape[:-2] != k.type.shape[:-2]:
        raise Unsupported("attention with grouped-query heads")
    return c.emit(Op.ATTENTION, q, k, v, causal=bool(c.arg(5, "is_causal", False)),
                  scale=c.arg(6, "scale"))


NN = {
    "convolution": convolution, "linear": linear, "addmm": addmm, "mm": matmul,
    "bmm": matmul, "matmul": matmul, "_softmax": softmax, "softmax": softmax,
    "_log_softmax": softmax, "log_softmax": softmax, "max_pool2d_with_indices": max_pool2d,
    "avg_pool2d": avg_pool2d, "_adaptive_avg_pool2d": adaptive_avg_pool2d,
    "adaptive_avg_pool2d": adaptive_avg_pool2d,
    "_native_batch_norm_legit_no_training": batch_norm, "layer_norm": layer_norm,
    "native_layer_norm": layer_norm, "mean": mean, "embedding": embedding,
    "scaled_dot_product_attention": attention,
}
