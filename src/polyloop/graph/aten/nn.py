# SPDX-License-Identifier: Apache-2.0
"""Neural-network ATen operators: convolution, dense layers, pooling, normalisation, softmax,
embedding and attention."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import CoordinateMode, NearestMode, PoolFn, ResizeMode
from .attention import attention
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
    groups)``: 2-D onto the graph's ``conv2d`` (its fast recipes), 1-D and 3-D and transposed
    ones onto ``conv``/``conv_transpose``."""
    x, w = c.value(0), c.value(1)
    nd = len(w.type.shape) - 2
    ins = [x, w] + ([c.value(2)] if c.has(2, "bias") else [])
    stride, padding = _ints(c.arg(3), nd), _ints(c.arg(4), nd)
    dilation, groups = _ints(c.arg(5), nd), int(c.arg(8, "groups", 1))
    if c.arg(6, "transposed"):
        return c.emit(Op.CONV_TRANSPOSE, *ins, strides=stride, pads=padding + padding,
                      dilations=dilation, groups=groups,
                      output_padding=_ints(c.arg(7, "output_padding", 0), nd))
    if nd == 2:
        return c.emit(Op.CONV2D, *ins, stride=stride, padding=padding, dilation=dilation,
                      groups=groups)
    return c.emit(Op.CONV, *ins, strides=stride, pads=padding + padding, dilations=dilation,
                  groups=groups)


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


def _pool(c: Call, fn: PoolFn) -> Value:
    """Max or average pooling: 2-D without ceil mode or dilation onto the graph's
    ``max_pool2d``/``avg_pool2d`` (their fused recipes), the rest onto ``pool``."""
    x = c.value(0)
    nd = len(x.type.shape) - 2
    kernel = _ints(c.arg(1, "kernel_size"), nd)
    stride = _ints(c.arg(2, "stride") or kernel, nd)
    padding = _ints(c.arg(3, "padding", 0), nd)
    if fn is PoolFn.MAX:
        dilation, ceil = _ints(c.arg(4, "dilation", 1), nd), bool(c.arg(5, "ceil_mode", False))
        include = False
    else:
        dilation, ceil = (1,) * nd, bool(c.arg(4, "ceil_mode", False))
        include = bool(c.arg(5, "count_include_pad", True))
        if c.arg(6, "divisor_override") is not None:
            raise Unsupported("average pooling with divisor_override")
    if nd == 2 and not ceil and dilation == (1, 1):
        attrs = {"kernel": kernel, "stride": stride, "padding": padding}
        if fn is PoolFn.MAX:
            return c.emit(Op.MAX_POOL2D, x, **attrs)
        return c.emit(Op.AVG_POOL2D, x, count_include_pad=include, **attrs)
    out = c.emit(Op.POOL, x, fn=fn, kernel=kernel, strides=stride, pads=padding + padding,
                 dilations=dilation, ceil_mode=ceil, count_include_pad=include)
    if out.type.shape != c.out_type().shape:
        raise PolyloopError(f"pooling gives {out.type}, PyTorch {c.out_type()}")
    return out


def max_pool(c: Call) -> tuple:
    return _pool(c, PoolFn.MAX), None


def avg_pool(c: Call) -> Value:
    return _pool(c, PoolFn.AVG)


def _adaptive_matrix(size: int, out: int) -> np.ndarray:
    """The (out, size) averaging matrix of adaptive pooling along one axis: window i covers
    [floor(i * size / out), ceil((i + 1) * size / out))."""
    m = np.zeros((out, size), np.float64)
    for i in range(out):
        lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def adaptive_avg_pool2d(c: Call) -> Value:
    """Equal windows onto ``adaptive_avg_pool2d``; others (windows that overlap or repeat, as
    7 x 7 from 2 x 2) as two products with constant averaging matrices."""
    x = c.value(0)
    out = _ints(c.arg(1, "output_size"), 2)
    h, w = x.type.shape[2], x.type.shape[3]
    if not (isinstance(h, int) and isinstance(w, int)):
        raise Unsupported("adaptive pooling of a symbolic image size")
    if h % out[0] == 0 and w % out[1] == 0:
        return c.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=out)
    dtype = x.type.dtype
    cols = c.importer.constant_value(_adaptive_matrix(w, out[1]).T.astype(dtype), "adaptive_w")
    rows = c.importer.constant_value(_adaptive_matrix(h, out[0]).astype(dtype), "adaptive_h")
    y = c.emit(Op.MATMUL, x, cols, name=f"{c.name}_cols")
    return c.emit(Op.MATMUL, rows, y)


def group_norm(c: Call) -> tuple:
    """``native_group_norm(x, weight, bias, N, C, HxW, group, eps)``: normalised per group of
    channels, then scaled and shifted per channel (mean and rstd results not computed)."""
    x = c.value(0)
    groups, eps = int(c.arg(6, "group")), float(c.arg(7, "eps"))
    n, ch = x.type.shape[0], x.type.shape[1]
    rest = 1
    for d in x.type.shape[1:]:
        if not isinstance(d, int):
            raise Unsupported("group norm over symbolic sizes")
        rest *= d
    y = c.emit(Op.RESHAPE, x, shape=(n, groups, rest // groups), name=f"{c.name}_groups")
    y = c.emit(Op.NORMALIZE, y, axes=(2,), eps=eps, name=f"{c.name}_norm")
    y = c.emit(Op.RESHAPE, y, shape=x.type.shape, name=f"{c.name}_back")
    per_channel = (ch,) + (1,) * (len(x.type.shape) - 2)
    if c.has(1, "weight"):
        y = c.emit(Op.MUL, y, c.emit(Op.RESHAPE, c.value(1), shape=per_channel,
                                     name=f"{c.name}_w"), name=f"{c.name}_scaled")
    if c.has(2, "bias"):
        y = c.emit(Op.ADD, y, c.emit(Op.RESHAPE, c.value(2), shape=per_channel,
                                     name=f"{c.name}_b"))
    return y, None, None


def upsample(c: Call) -> Value:
    """``upsample_nearest2d``/``upsample_bilinear2d`` (``.vec`` or with sizes) as a resize;
    PyTorch maps output coordinate ``o`` to ``o * in / out`` (nearest: rounded down), or
    the half-pixel or align-corners forms for bilinear."""
    x = c.value(0)
    out = c.out_type().shape
    nearest = c.node.target.__name__.startswith("upsample_nearest")
    scales = [1.0, 1.0]
    for a in (2, 3):
        if not isinstance(x.type.shape[a], int):
            raise Unsupported("resizing a symbolic image size")
        scales.append(out[a] / x.type.shape[a])
    factors = c.arg(2 if nearest else 3, "scale_factors")
    if factors is not None and not isinstance(factors, (int, float)):
        scales[2:] = [float(f) for f in factors]
    if nearest:
        return c.emit(Op.RESIZE, x, shape=out, scales=tuple(scales), mode=ResizeMode.NEAREST,
                      coordinates=CoordinateMode.ASYMMETRIC, nearest=NearestMode.FLOOR)
    align = bool(c.arg(2, "align_corners"))
    return c.emit(Op.RESIZE, x, shape=out, scales=tuple(scales), mode=ResizeMode.LINEAR,
                  coordinates=CoordinateMode.ALIGN_CORNERS if align else
                  CoordinateMode.PYTORCH_HALF_PIXEL)


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


def embedding(c: Call) -> Value:
    if c.arg(2, "padding_idx", -1) not in (-1, None) and c.arg(4, "sparse", False):
        raise Unsupported("sparse embedding")
    weight, idx = c.value(0), c.value(1)
    if idx.type.dtype not in ("int64", "int32"):
        raise Unsupported(f"embedding with {idx.type.dtype} indices")
    return c.emit(Op.EMBEDDING, weight, idx)


NN = {
    "convolution": convolution, "linear": linear, "addmm": addmm, "mm": matmul,
    "bmm": matmul, "matmul": matmul, "_softmax": softmax, "softmax": softmax,
    "_log_softmax": softmax, "log_softmax": softmax, "max_pool1d_with_indices": max_pool,
    "max_pool2d_with_indices": max_pool, "max_pool3d_with_indices": max_pool,
    "avg_pool1d": avg_pool, "avg_pool2d": avg_pool, "avg_pool3d": avg_pool,
    "_adaptive_avg_pool2d": adaptive_avg_pool2d, "adaptive_avg_pool2d": adaptive_avg_pool2d,
    "_native_batch_norm_legit_no_training": batch_norm, "layer_norm": layer_norm,
    "native_layer_norm": layer_norm, "native_group_norm": group_norm, "embedding": embedding,
    "scaled_dot_product_attention": attention, "upsample_nearest2d": upsample,
    "upsample_bilinear2d": upsample,
}
