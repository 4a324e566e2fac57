# SPDX-License-Identifier: Apache-2.0
"""Convolution, pooling, dense and matrix products as tensor expressions.

Each builder takes the input tensors, the call's attributes, the result shape (as te
expressions) and the result name, and returns the result tensor; intermediate stages are
named after the result (``<name>_pad``, ``<name>_sum``).
"""
from __future__ import annotations

from ...errors import PolyloopError
from ...frontend import te
from ...frontend.te import Tensor
from ...ir.elementwise import exp, log as log_, maximum, minimum, where
from ...ir.expr import Const
from .elementwise import broadcast_index

# The padding value of max pooling: the lowest finite float32 (a window always holds at least
# one element of the image, so it never reaches the result).
LOWEST = -3.4028234663852886e38


def const_int(e: object, what: str) -> int:
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    raise PolyloopError(f"{what} must be a constant size, got {e}; only the batch dimension may "
                        "be symbolic")


def pad2d(x: Tensor, ph: int, pw: int, value: float, name: str) -> Tensor:
    """``x`` (N, C, H, W) with ``ph`` rows and ``pw`` columns of ``value`` on each side."""
    if ph == 0 and pw == 0:
        return x
    n, c, h, w = x.shape
    return te.compute((n, c, h + 2 * ph, w + 2 * pw),
                      lambda b, ch, y, xx: where((y >= ph) & (y < h + ph) & (xx >= pw)
                                                 & (xx < w + pw), x[b, ch, y - ph, xx - pw],
                                                 value), name=f"{name}_pad")


def conv2d(inputs, attrs, shape, name):
    """NCHW convolution with stride, zero padding, dilation and groups (then bias)."""
    x, w = inputs[0], inputs[1]
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    groups = attrs.get("groups", 1)
    k_out = const_int(w.shape[0], "conv2d output channels")
    cg = const_int(w.shape[1], "conv2d input channels")
    src = pad2d(x, ph, pw, 0.0, name)
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, w.shape[2]), name="ry")
    rx = te.reduce_axis((0, w.shape[3]), name="rx")
    kg = k_out // groups

    def channel(k):
        return rc if groups == 1 else (k // kg) * cg + rc
    conv = te.compute(shape, lambda b, k, y, xx: te.sum(
        src[b, channel(k), y * sh + ry * dh, xx * sw + rx * dw] * w[k, rc, ry, rx],
        axis=[rc, ry, rx]), name=name if len(inputs) == 2 else f"{name}_conv")
    if len(inputs) == 2:
        return conv
    bias = inputs[2]
    return te.compute(shape, lambda b, k, y, xx: conv[b, k, y, xx] + bias[k], name=name)


# Windows of at most this many rows and columns are written out as trees of max/add (no
# reduction loop, nothing to initialise); a larger window (global pooling) stays a reduction.
UNROLL_WINDOW = 8


def _tree(terms: list, kind: str):
    """``terms`` combined pairwise (max or +): a balanced tree, short dependency chains."""
    while len(terms) > 1:
        pairs = [(terms[k], terms[k + 1]) for k in range(0, len(terms) - 1, 2)]
        tail = terms[len(pairs) * 2:]
        terms = [maximum(a, b) if kind == "max" else a + b for a, b in pairs] + tail
    return terms[0]


def _padded(x: Tensor, ph: int, pw: int, value: float):
    """A reader of ``x`` in padded coordinates: ``value`` outside the image. The condition
    guards the load, so nothing outside ``x`` is read."""
    h, w = x.shape[2], x.shape[3]

    def read(b, ch, y, xx):
        conds = ([y >= ph, y < h + ph] if ph else []) + ([xx >= pw, xx < w + pw] if pw else [])
        if not conds:
            return x[b, ch, y, xx]
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        return where(cond, x[b, ch, y - ph, xx - pw], value)
    return read


def pool2d(inputs, attrs, shape, name, *, kind: str):
    """Max or average pooling over windows of the two last axes.

    A small window is separable: ``<name>_rows`` combines the window's rows along whole
    (padded) input rows, contiguous and so vectorizable, then ``name`` combines each
    window's columns of that. Every ``max`` and ``+`` of a window is written out."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    if kh > UNROLL_WINDOW or kw > UNROLL_WINDOW:
        return _pool_reduce(inputs, attrs, shape, name, kind=kind)
    x = inputs[0]
    src = _padded(x, ph, pw, LOWEST if kind == "max" else 0.0)
    n, c, oh, ow = shape
    rows = te.compute((n, c, oh, (ow - 1) * sw + kw), lambda b, ch, y, xx: _tree(
        [src(b, ch, y * sh + r, xx) for r in range(kh)], kind), name=f"{name}_rows")

    def window(b, ch, y, xx):
        return _tree([rows[b, ch, y, xx * sw + r] for r in range(kw)], kind)
    if kind == "max":
        return te.compute(shape, window, name=name)
    return _average(x, attrs, shape, name, window)


def _average(x: Tensor, attrs, shape, name, total):
    """``total`` (a window's sum) over the window's size, or over the count of its elements
    inside the image when ``count_include_pad`` is false."""
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    if attrs.get("count_include_pad", True) or (ph == 0 and pw == 0):
        return te.compute(shape, lambda *i: total(*i) * (1.0 / (kh * kw)), name=name)
    h, w = x.shape[2], x.shape[3]

    def count(y, xx):
        rows = minimum(y * sh - ph + kh, h) - maximum(y * sh - ph, 0)
        cols = minimum(xx * sw - pw + kw, w) - maximum(xx * sw - pw, 0)
        return (rows * cols).astype("float32")
    return te.compute(shape, lambda b, c, y, xx: total(b, c, y, xx) / count(y, xx), name=name)


def _pool_reduce(inputs, attrs, shape, name, *, kind: str):
    """Pooling with the window as reduction axes (for windows too large to write out)."""
    x = inputs[0]
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    src = pad2d(x, ph, pw, LOWEST if kind == "max" else 0.0, name)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    reduce = te.max if kind == "max" else te.sum
    total = te.compute(shape, lambda b, c, y, xx: reduce(
        src[b, c, y * sh + ry, xx * sw + rx], axis=[ry, rx]),
        name=name if kind == "max" else f"{name}_sum")
    if kind == "max":
        return total
    return _average(x, attrs, shape, name, lambda *i: total[i])


def adaptive_avg_pool2d(inputs, attrs, shape, name):
    x = inputs[0]
    h, w = const_int(x.shape[2], "the height"), const_int(x.shape[3], "the width")
    oh, ow = attrs["output_size"]
    if h % oh or w % ow:
        raise PolyloopError(f"adaptive_avg_pool2d '{name}': {h}x{w} to {oh}x{ow} has windows of "
                            "unequal size; only output sizes that divide the input are supported")
    kh, kw = h // oh, w // ow
    return pool2d(inputs, {"kernel": (kh, kw), "stride": (kh, kw), "padding": (0, 0)}, shape,
                  name, kind="avg")


def linear(inputs, attrs, shape, name):
    """``y[..., j] = sum_k x[..., k] * w[j, k] (+ b[j])``; weights stored (in, out) when
    ``transposed`` (the layout the fold pass gives constant weights: contiguous along j)."""
    x, w = inputs[0], inputs[1]
    t = attrs.get("transposed", False)
    k = te.reduce_axis((0, x.shape[-1]), name="rk")

    def weight(j):
        return w[k, j] if t else w[j, k]
    dense = te.compute(shape, lambda *i: te.sum(x[i[:-1] + (k,)] * weight(i[-1]), axis=k),
                       name=name if len(inputs) == 2 else f"{name}_dense")
    if len(inputs) == 2:
        return dense
    bias = inputs[2]
    return te.compute(shape, lambda *i: dense[i] + bias[i[-1]], name=name)


def matmul(inputs, attrs, shape, name):
    """``c[..., i, j] = sum_k a[..., i, k] * b[..., k, j]`` with broadcast batch axes; with
    ``columns``, b is in column panels ``b[j // nr, k, j % nr]`` (``pack_matmul_weight``)."""
    a, b = inputs
    n = len(shape)
    k = te.reduce_axis((0, a.shape[-1]), name="rk")
    if attrs.get("columns") is not None:
        nr = const_int(b.shape[2], "matmul panel width")
        return te.compute(shape, lambda i, j: te.sum(a[i, k] * b[j // nr, k, j % nr], axis=k),
                          name=name)

    def read(t, batch, row, col):
        lead = broadcast_index(te_view(t.shape[:-2]), n - 2, batch) if t.ndim > 2 else ()
        return t[lead + (row, col)]
    return te.compute(shape, lambda *i: te.sum(read(a, i[:-2], i[-2], k)
                                                * read(b, i[:-2], k, i[-1]), axis=k), name=name)


class te_view:  # noqa: N801 - a shape holder for broadcast_index
    """Just the shape of a tensor, for ``broadcast_index`` on a part of its axes."""

    def __init__(self, shape):
        self.shape = shape
        self.ndim = len(shape)


def attention(inputs, attrs, shape, name):
    """Scaled dot-product attention over the two last axes of q, k, v (optionally causal)."""
    q, k, v = inputs
    n = len(shape)
    e_dim = q.shape[-1]
    length = k.shape[-2]
    scale = attrs.get("scale") or 1.0 / float(const_int(e_dim, "the head size")) ** 0.5
    causal = attrs.get("causal", False)
    d = te.reduce_axis((0, e_dim), name="rd")
    s_shape = tuple(shape[:-1]) + (length,)
    scores = te.compute(s_shape, lambda *i: te.sum(q[i[:-1] + (d,)] * k[i[:-2] + (i[-1], d)],
                                                   axis=d), name=f"{name}_qk")
    if causal:
        raw = scores
        scores = te.compute(s_shape, lambda *i: where(i[-1] > i[-2], LOWEST, raw[i] * scale),
                            name=f"{name}_masked")
        scale = 1.0
    from_ = _softmax_stages(scores, n - 1, f"{name}_p", scale=scale)
    j = te.reduce_axis((0, length), name="rj")
    return te.compute(shape, lambda *i: te.sum(from_[i[:-1] + (j,)] * v[i[:-2] + (j, i[-1])],
                                               axis=j), name=name)


def _softmax_stages(x: Tensor, axis: int, name: str, *, scale: float = 1.0,
                    log: bool = False) -> Tensor:
    shape = x.shape
    red_shape = tuple(d for a, d in enumerate(shape) if a != axis)

    def at(i, r):
        return i[:axis] + (r,) + i[axis:]
    r1 = te.reduce_axis((0, shape[axis]), name="rs")
    mx = te.compute(red_shape, lambda *i: te.max(x[at(i, r1)], axis=r1), name=f"{name}_max")

    def drop(i):
        return i[:axis] + i[axis + 1:]
    def shifted(i):
        d = x[i] - mx[drop(i)]
        return d if scale == 1.0 else d * scale
    e = te.compute(shape, lambda *i: exp(shifted(i)), name=f"{name}_exp")
    r2 = te.reduce_axis((0, shape[axis]), name="rs")
    total = te.compute(red_shape, lambda *i: te.sum(e[at(i, r2)], axis=r2), name=f"{name}_sum")
    if log:
        return te.compute(shape, lambda *i: x[i] - mx[drop(i)] - log_(total[drop(i)]), name=name)
    return te.compute(shape, lambda *i: e[i] / total[drop(i)], name=name)


def softmax(inputs, attrs, shape, name):
    return _softmax_stages(inputs[0], attrs["axis"] % len(shape), name)


def log_softmax(inputs, attrs, shape, name):
    return _softmax_stages(inputs[0], attrs["axis"] % len(shape), name, log=True)


NN = {
    "conv2d": conv2d, "linear": linear, "matmul": matmul, "attention": attention,
    "max_pool2d": lambda i, a, s, n: pool2d(i, a, s, n, kind="max"),
    "avg_pool2d": lambda i, a, s, n: pool2d(i, a, s, n, kind="avg"),
    "adaptive_avg_pool2d": adaptive_avg_pool2d, "softmax": softmax, "log_softmax": log_softmax,
}
