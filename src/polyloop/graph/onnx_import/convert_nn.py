# SPDX-License-Identifier: Apache-2.0
"""ONNX convolutions, poolings, matrix products, Einsum and LRN.

A 2-D convolution or pooling with symmetric padding keeps the specific ``Op.CONV2D`` /
``Op.MAX_POOL2D`` / ``Op.AVG_POOL2D`` (the fast recipes and fusion passes match on them);
every other case goes to the general N-D ``Op.CONV`` / ``Op.POOL``.
"""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import PoolFn, ReduceFn
from ..shapes_nn import window_count
from .convert_tensor import reshape
from .node import Node


def _ints(n: Node, key: str, nd: int, default: int) -> list[int]:
    v = n.attr(key)
    out = [default] * nd if v is None else [int(e) for e in v]
    if len(out) != nd:
        raise PolyloopError(f"{key} {out} needs {nd} entries")
    return out


def window_pads(n: Node, sizes: list[int], kernel: list[int], strides: list[int],
                dilations: list[int]) -> list[int]:
    """Begin and end pads from ``pads`` or ``auto_pad`` (SAME_UPPER puts the odd one at the
    end, SAME_LOWER at the beginning)."""
    nd = len(sizes)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = _ints(n, "pads", 2 * nd, 0)
        if min(pads) < 0:
            raise PolyloopError(f"pads {pads} must not be negative")
        return pads
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise PolyloopError(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    n.attr("pads")
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def _spatial_sizes(x: Value) -> list[int]:
    sizes = x.type.shape[2:]
    if not all(isinstance(d, int) for d in sizes):
        raise PolyloopError(f"the spatial sizes {sizes} must be constants")
    if not 1 <= len(sizes) <= 3:
        raise PolyloopError(f"{len(sizes)} spatial axes: 1 to 3 are supported")
    return list(sizes)


def convert_conv(n: Node) -> Value:
    x, w = n.value(0), n.value(1)
    sizes = _spatial_sizes(x)
    nd = len(sizes)
    kernel = _ints(n, "kernel_shape", nd, 0) if n.has_attr("kernel_shape") else \
        list(w.type.shape[2:])
    if list(w.type.shape[2:]) != kernel:
        raise PolyloopError(f"kernel_shape {kernel} differs from the weights' {w.type.shape}")
    strides, dil = _ints(n, "strides", nd, 1), _ints(n, "dilations", nd, 1)
    pads = window_pads(n, sizes, kernel, strides, dil)
    groups = int(n.attr("group", 1))
    ins = [x, w] + ([n.value(2)] if n.has(2) else [])
    if nd == 2 and pads[:2] == pads[2:] and x.type.dtype == "float32":
        return n.emit(Op.CONV2D, *ins, stride=tuple(strides), padding=tuple(pads[:2]),
                      dilation=tuple(dil), groups=groups)
    return n.emit(Op.CONV, *ins, strides=tuple(strides), pads=tuple(pads),
                  dilations=tuple(dil), groups=groups)


def convert_conv_transpose(n: Node) -> Value:
    x, w = n.value(0), n.value(1)
    sizes = _spatial_sizes(x)
    nd = len(sizes)
    kernel = list(w.type.shape[2:])
    if n.has_attr("kernel_shape") and _ints(n, "kernel_shape", nd, 0) != kernel:
        raise PolyloopError(f"kernel_shape differs from the weights' {w.type.shape}")
    n.attr("kernel_shape")
    strides, dil = _ints(n, "strides", nd, 1), _ints(n, "dilations", nd, 1)
    extra = _ints(n, "output_padding", nd, 0)
    groups = int(n.attr("group", 1))
    auto = n.attr("auto_pad", "NOTSET")
    target = n.attr("output_shape")
    full = [s * (i - 1) + e + (k - 1) * d + 1 for i, s, e, k, d in
            zip(sizes, strides, extra, kernel, dil)]
    if target is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        if target is not None and n.has_attr("pads"):
            raise PolyloopError("ConvTranspose with both output_shape and pads: give one")
        want = [int(t) for t in target][-nd:] if target is not None else \
            [i * s for i, s in zip(sizes, strides)]
        total = [f - t for f, t in zip(full, want)]   # negative: the output grows
        upper = auto == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        pads = begin + [t - b for t, b in zip(total, begin)]
    elif auto in ("NOTSET", "", "VALID"):
        pads = [0] * (2 * nd) if auto == "VALID" else _ints(n, "pads", 2 * nd, 0)
    else:
        raise PolyloopError(f"auto_pad {auto!r} is not NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    ins = [x, w] + ([n.value(2)] if n.has(2) else [])
    return n.emit(Op.CONV_TRANSPOSE, *ins, strides=tuple(strides), pads=tuple(pads),
                  dilations=tuple(dil), groups=groups, output_padding=tuple(extra))


def _pool_attrs(n: Node, x: Value) -> dict:
    sizes = _spatial_sizes(x)
    nd = len(sizes)
    kernel = _ints(n, "kernel_shape", nd, 0)
    strides, dil = _ints(n, "strides", nd, 1), _ints(n, "dilations", nd, 1)
    pads = window_pads(n, sizes, kernel, strides, dil)
    ceil_mode = n.flag("ceil_mode", 0)
    return dict(kernel=tuple(kernel), strides=tuple(strides), pads=tuple(pads),
                dilations=tuple(dil), ceil_mode=ceil_mode)


def _symmetric_2d(x: Value, a: dict) -> bool:
    """Whether the specific 2-D pooling computes the same: symmetric pads smaller than the
    kernel, no dilation, and ceil mode adding no window."""
    sizes = x.type.shape[2:]
    if len(sizes) != 2 or a["pads"][:2] != a["pads"][2:] or a["dilations"] != (1, 1) \
            or x.type.dtype != "float32" or any(p >= k for p, k in zip(a["pads"], a["kernel"])):
        return False
    return all(window_count(Op.POOL, (), s, k, st, p, p, 1, True)
               == window_count(Op.POOL, (), s, k, st, p, p, 1, False)
               for s, k, st, p in zip(sizes, a["kernel"], a["strides"], a["pads"]))


def convert_max_pool(n: Node) -> tuple:
    x = n.value(0)
    a = _pool_attrs(n, x)
    order = int(n.flag("storage_order", 0))
    indices = None
    if n.wants(1):
        if order and len(a["kernel"]) != 2:
            raise PolyloopError("storage_order=1 numbers the indices of 2-D pooling only")
        indices = n.emit(Op.POOL, x, fn=PoolFn.ARGMAX, storage_order=order, **a)
    if _symmetric_2d(x, a):
        y = n.emit(Op.MAX_POOL2D, x, kernel=a["kernel"], stride=a["strides"],
                   padding=a["pads"][:2])
    else:
        y = n.emit(Op.POOL, x, fn=PoolFn.MAX, **a)
    return (y, indices)


def convert_average_pool(n: Node) -> Value:
    x = n.value(0)
    a = _pool_attrs(n, x)
    include = n.flag("count_include_pad", 0)
    if _symmetric_2d(x, a):
        return n.emit(Op.AVG_POOL2D, x, kernel=a["kernel"], stride=a["strides"],
                      padding=a["pads"][:2], count_include_pad=include)
    return n.emit(Op.POOL, x, fn=PoolFn.AVG, count_include_pad=include, **a)


def convert_lp_pool(n: Node) -> Value:
    x = n.value(0)
    a = _pool_attrs(n, x)
    return n.emit(Op.POOL, x, fn=PoolFn.LP, p=int(n.attr("p", 2)), **a)


def convert_global_pool(n: Node) -> Value:
    x = n.value(0)
    axes = tuple(range(2, len(x.type.shape)))
    if n.op_type == "GlobalAveragePool":
        if len(axes) == 2 and x.type.dtype == "float32":
            return n.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=(1, 1))
        return n.emit(Op.REDUCE, x, fn=ReduceFn.MEAN, axes=axes, keepdims=True)
    if n.op_type == "GlobalMaxPool":
        return n.emit(Op.REDUCE, x, fn=ReduceFn.MAX, axes=axes, keepdims=True)
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise PolyloopError(f"GlobalLpPool with p={p}: only p = 1 and 2 are supported")
    return n.emit(Op.REDUCE, x, fn=ReduceFn.L1 if p == 1 else ReduceFn.L2, axes=axes,
                  keepdims=True)


def matmul(n: Node, a: Value, b: Value) -> Value:
    """ONNX MatMul (NumPy's): a 1-D operand is a row (left) or a column (right) vector."""
    ra, rb = len(a.type.shape), len(b.type.shape)
    if ra == 0 or rb == 0:
        raise PolyloopError("MatMul needs operands of rank 1 or more")
    a2 = reshape(n, a, (1,) + a.type.shape) if ra == 1 else a
    b2 = reshape(n, b, b.type.shape + (1,)) if rb == 1 else b
    out = n.emit(Op.MATMUL, a2, b2)
    shape = out.type.shape
    if ra == 1:
        shape = shape[:-2] + shape[-1:]
    if rb == 1:
        shape = shape[:-1]
    return reshape(n, out, shape)


def convert_matmul(n: Node) -> Value:
    return matmul(n, n.value(0), n.value(1))


def convert_gemm(n: Node) -> Value:
    a, b = n.value(0), n.value(1)
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    trans_a, trans_b = int(n.flag("transA", 0)), int(n.flag("transB", 0))
    if len(a.type.shape) != 2 or len(b.type.shape) != 2:
        raise PolyloopError("Gemm needs 2-D A and B")
    if trans_a:
        a = n.emit(Op.PERMUTE, a, axes=[1, 0])
    w = n.b.data(b)
    c = n.value(2) if n.has(2) else None
    out_n = b.type.shape[0] if trans_b else b.type.shape[1]
    if w is not None and alpha == 1.0 and a.type.dtype == "float32":
        weight = n.const(w if trans_b else w.T.copy())
        bias = c if c is not None and beta == 1.0 and c.type.shape in ((out_n,),) else None
        y = n.emit(Op.LINEAR, a, weight, *([bias] if bias is not None else []))
        if c is None or bias is not None:
            return y
    else:
        if trans_b:
            b = n.emit(Op.PERMUTE, b, axes=[1, 0])
        y = n.emit(Op.MATMUL, a, b)
        if alpha != 1.0:
            y = n.emit(Op.MUL, y, n.const(np.array(alpha, y.type.dtype)))
    if c is None:
        return y
    if beta != 1.0:
        c = n.emit(Op.MUL, c, n.const(np.array(beta, c.type.dtype)))
    return n.emit(Op.ADD, y, c)


def einsum_equation(eq: str, ranks: list[int]) -> str:
    """The explicit form of an equation (the implicit one's result: the ellipsis, then the
    letters that occur once, in alphabetical order)."""
    eq = eq.replace(" ", "")
    if "->" in eq:
        return eq
    letters = eq.replace("...", "").replace(",", "")
    once = sorted(ch for ch in set(letters) if letters.count(ch) == 1)
    return f"{eq}->{'...' if '...' in eq else ''}{''.join(once)}"


def convert_einsum(n: Node) -> Value:
    xs = n.values()
    eq = einsum_equation(str(n.attr("equation")), [len(x.type.shape) for x in xs])
    return n.emit(Op.EINSUM, *xs, equation=eq)


def convert_lrn(n: Node) -> Value:
    return n.emit(Op.LRN, n.value(0), size=int(n.attr("size")),
                  alpha=float(n.attr("alpha", 1e-4)), beta=float(n.attr("beta", 0.75)),
                  bias=float(n.attr("bias", 1.0)))


CONVERTERS = {
    "Conv": convert_conv, "ConvTranspose": convert_conv_transpose,
    "MaxPool": convert_max_pool, "AveragePool": convert_average_pool,
    "LpPool": convert_lp_pool, "GlobalAveragePool": convert_global_pool,
    "GlobalMaxPool": convert_global_pool, "GlobalLpPool": convert_global_pool,
    "MatMul": convert_matmul, "Gemm": convert_gemm, "Einsum": convert_einsum,
    "LRN": convert_lrn,
}
