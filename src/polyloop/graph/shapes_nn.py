# SPDX-License-Identifier: Apache-2.0
"""Shape and dtype rules of the general windowed and normalising operators: N-D convolution
and its transpose, pooling, normalisation, LRN, einsum and resize."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .ir import Dim, Op, TensorType
from .kinds import PoolFn
from .shape_util import _fail, broadcast, normalize_axes, static

Attrs = dict[str, object]
_FLOATS = ("float16", "float32", "float64")


def _spatial(op: Op, types, attrs, *keys: str) -> tuple[int, list[tuple[int, ...]]]:
    """The spatial rank of x (N, C, spatial...) and the attributes ``keys``, each one entry
    per spatial axis (``pads``: two)."""
    x = types[0]
    nd = len(x.shape) - 2
    if not 1 <= nd <= 3:
        raise _fail(op, types, f"{op} takes (N, C, spatial...) data with 1 to 3 spatial axes")
    out = []
    for k in keys:
        v = tuple(attrs.get(k, ()))
        want = 2 * nd if k == "pads" else nd
        if len(v) != want or not all(isinstance(e, int) for e in v):
            raise _fail(op, types, f"{k} needs {want} integers, got {v}")
        if k in ("strides", "dilations", "kernel") and min(v) < 1:
            raise _fail(op, types, f"{k} must be positive, got {v}")
        out.append(v)
    return nd, out


def window_count(op: Op, types, size: int, kernel: int, stride: int, begin: int, end: int,
                 dilation: int, ceil_mode: bool = False) -> int:
    """How many windows fit (ceil mode: one more when it starts inside input or begin pad)."""
    span = dilation * (kernel - 1) + 1
    room = size + begin + end - span
    if room < 0:
        raise _fail(op, types, f"a window of {span} does not fit an axis of {size} padded by "
                    f"({begin}, {end})")
    n = -(-room // stride) + 1 if ceil_mode else room // stride + 1
    if ceil_mode and (n - 1) * stride >= size + begin:
        n -= 1
    return n


def _conv(op: Op, types, attrs) -> TensorType:
    x, w = types[0], types[1]
    nd, (strides, pads, dilations) = _spatial(op, types, attrs, "strides", "pads", "dilations")
    groups = attrs.get("groups", 1)
    c = static(op, types, x.shape[1], "the input channels")
    if len(w.shape) != nd + 2 or not isinstance(groups, int) or groups < 1 \
            or c != w.shape[1] * groups or w.shape[0] % groups or x.dtype not in _FLOATS \
            or w.dtype != x.dtype:
        raise _fail(op, types, f"conv needs float (N, C, ...) data and (K, C/groups, ...) "
                    f"weights with K divisible by groups ({groups})")
    if len(types) == 3 and types[2].shape != (w.shape[0],):
        raise _fail(op, types, "the bias needs one value per output channel")
    out = tuple(window_count(op, types, static(op, types, x.shape[2 + k], "a spatial size"),
                             w.shape[2 + k], strides[k], pads[k], pads[nd + k], dilations[k])
                for k in range(nd))
    return TensorType((x.shape[0], w.shape[0]) + out, x.dtype)


def _conv_transpose(op: Op, types, attrs) -> TensorType:
    x, w = types[0], types[1]
    nd, (strides, pads, dilations, extra) = _spatial(op, types, attrs, "strides", "pads",
                                                     "dilations", "output_padding")
    groups = attrs.get("groups", 1)
    if len(w.shape) != nd + 2 or not isinstance(groups, int) or groups < 1 \
            or x.shape[1] != w.shape[0] or w.shape[0] % groups or x.dtype not in _FLOATS:
        raise _fail(op, types, f"conv_transpose needs float (N, C, ...) data and (C, K/groups, "
                    f"...) weights with C divisible by groups ({groups})")
    k_out = w.shape[1] * groups
    if len(types) == 3 and types[2].shape != (k_out,):
        raise _fail(op, types, "the bias needs one value per output channel")
    out = []
    for k in range(nd):
        size = static(op, types, x.shape[2 + k], "a spatial size")
        n = strides[k] * (size - 1) + extra[k] + dilations[k] * (w.shape[2 + k] - 1) + 1 \
            - pads[k] - pads[nd + k]
        if n < 1 or extra[k] < 0:
            raise _fail(op, types, f"spatial axis {k} would have {n} elements")
        out.append(n)
    return TensorType((x.shape[0], k_out) + tuple(out), x.dtype)


def _pool(op: Op, types, attrs) -> TensorType:
    x = types[0]
    nd, (kernel, strides, pads, dilations) = _spatial(op, types, attrs, "kernel", "strides",
                                                      "pads", "dilations")
    fn = attrs.get("fn")
    if not isinstance(fn, PoolFn) or x.dtype not in _FLOATS and fn is not PoolFn.MAX:
        raise _fail(op, types, f"pool {fn!r} is not defined on {x.dtype} tensors")
    if any(p >= k for p, k in zip(pads, kernel + kernel)):
        raise _fail(op, types, f"pads {pads} must be smaller than the kernel {kernel} (a window "
                    "would hold padding only)")
    ceil_mode = bool(attrs.get("ceil_mode", False))
    out = tuple(window_count(op, types, static(op, types, x.shape[2 + k], "a spatial size"),
                             kernel[k], strides[k], pads[k], pads[nd + k], dilations[k],
                             ceil_mode) for k in range(nd))
    return TensorType(x.shape[:2] + out, "int64" if fn is PoolFn.ARGMAX else x.dtype)


def _normalize(op: Op, types, attrs) -> TensorType:
    x = types[0]
    if x.dtype not in _FLOATS:
        raise _fail(op, types, "normalize takes a float tensor")
    normalize_axes(op, types, attrs.get("axes", ()), len(x.shape))
    for t in types[1:]:
        if t.dtype != x.dtype or broadcast(op, (x, t)) != x.shape:
            raise _fail(op, types, "scale and bias must broadcast to the data's shape")
    return x


def _lrn(op: Op, types, attrs) -> TensorType:
    x = types[0]
    size = attrs.get("size")
    if len(x.shape) < 3 or x.dtype not in _FLOATS or not isinstance(size, int) or size < 1:
        raise _fail(op, types, "lrn takes float (N, C, ...) data and a positive size")
    return x


@dataclass(frozen=True, slots=True)
class Einsum:
    """A parsed explicit equation: each operand's subscripts (``.`` marks the ellipsis axes)
    and the result's."""

    inputs: tuple[str, ...]
    output: str


_EINSUM = re.compile(r"[A-Za-z]*(\.\.\.)?[A-Za-z]*")


def parse_einsum(equation: str, ranks: tuple[int, ...]) -> Einsum:
    """Subscripts with the ellipsis spelled out as ``.`` per broadcast axis (as many as the
    largest operand needs); raises ValueError for a malformed equation."""
    eq = equation.replace(" ", "")
    if eq.count("->") != 1:
        raise ValueError("the equation needs its explicit form 'ab,bc->ac'")
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks) or not all(_EINSUM.fullmatch(t) for t in terms + [out]):
        raise ValueError(f"{len(terms)} subscript terms for {len(ranks)} operands, or a term "
                         "that is not letters around one '...'")
    widths = [r - len(t.replace("...", "")) for t, r in zip(terms, ranks)]
    if any(w < 0 or (w > 0 and "..." not in t) for t, w in zip(terms, widths)):
        raise ValueError("a term's letters do not match its operand's rank")
    ell = max(widths, default=0)
    spelled = tuple(t.replace("...", "." * w) for t, w in zip(terms, widths))
    result = out.replace("...", "." * ell)
    if ell and "..." not in out:
        raise ValueError("the operands have '...' axes the result does not keep; name them "
                         "in the result")
    letters = set("".join(spelled))
    if any(ch not in letters and ch != "." for ch in result) or len(set(out.replace(".", ""))) \
            != len(out.replace(".", "").replace("...", "")):
        raise ValueError("the result names a subscript no operand has, or one twice")
    return Einsum(spelled, result)


def einsum_sizes(op: Op, types, e: Einsum) -> tuple[dict[str, Dim], tuple[Dim, ...]]:
    """Each letter's size and the broadcast sizes of the ellipsis axes."""
    sizes: dict[str, Dim] = {}
    ell_types = []
    for term, t in zip(e.inputs, types):
        dots = [d for ch, d in zip(term, t.shape) if ch == "."]
        ell_types.append(TensorType(tuple(dots)))
        for ch, d in zip(term, t.shape):
            if ch != "." and sizes.setdefault(ch, d) != d:
                raise _fail(op, types, f"subscript {ch!r} has sizes {sizes[ch]} and {d}")
    ell = broadcast(op, tuple(ell_types)) if ell_types else ()
    return sizes, ell


def _einsum(op: Op, types, attrs) -> TensorType:
    try:
        e = parse_einsum(str(attrs.get("equation")), tuple(len(t.shape) for t in types))
    except ValueError as err:
        raise _fail(op, types, f"einsum {attrs.get('equation')!r}: {err}") from None
    if len({t.dtype for t in types}) != 1 or types[0].dtype == "bool":
        raise _fail(op, types, "einsum takes numeric operands of one dtype")
    sizes, ell = einsum_sizes(op, types, e)
    width = e.output.count(".")
    shape = tuple(ell[len(ell) - width:]) if width else ()
    out = tuple(sizes[ch] for ch in e.output if ch != ".")
    start = e.output.find(".")
    shape = out[:start] + shape + out[start:] if width else out
    return TensorType(shape, types[0].dtype)


def _resize(op: Op, types, attrs) -> TensorType:
    x = types[0]
    shape = tuple(attrs.get("shape", ()))
    scales = tuple(attrs.get("scales", ()))
    if x.dtype not in _FLOATS or len(shape) != len(x.shape) or len(scales) != len(x.shape):
        raise _fail(op, types, "resize takes a float tensor, an output shape and a scale per "
                    "axis")
    for k, (d, n) in enumerate(zip(x.shape, shape)):
        if d != n:
            static(op, types, d, f"resized axis {k}")
            if not isinstance(n, int) or n < 1:
                raise _fail(op, types, f"axis {k} cannot be resized to {n}")
    return TensorType(shape, x.dtype)


def _grid_sample(op: Op, types, attrs) -> TensorType:
    x, grid = types
    nd = len(x.shape) - 2
    if nd < 1 or x.dtype not in _FLOATS or grid.dtype != x.dtype or len(grid.shape) != nd + 2 \
            or grid.shape[-1] != nd or grid.shape[0] != x.shape[0]:
        raise _fail(op, types, "grid_sample takes float (N, C, spatial...) data and a grid "
                    "(N, out..., spatial rank) of the same dtype")
    for k, d in enumerate(x.shape[2:]):
        static(op, types, d, f"spatial axis {k}")
    return TensorType(x.shape[:2] + grid.shape[1:-1], x.dtype)


NN_RULES: dict[Op, Callable[[Op, tuple, Attrs], TensorType]] = {
    Op.CONV: _conv, Op.CONV_TRANSPOSE: _conv_transpose, Op.POOL: _pool,
    Op.NORMALIZE: _normalize, Op.LRN: _lrn, Op.EINSUM: _einsum, Op.RESIZE: _resize,
    Op.GRID_SAMPLE: _grid_sample,
}
