# SPDX-License-Identifier: Apache-2.0
"""ONNX shape and data-movement operators: reshapes and transposes (views and permutes),
slices and splits, pads, broadcasts, tiles, gathers, shape arithmetic."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Dim, Op, Value
from ..kinds import PadMode
from .dims import flat, normalize, reshape_target, slice_range
from . import shape_values
from .node import Node, Shape, onnx_dtype


def reshape(n: Node, x: Value, shape: tuple[Dim, ...]) -> Value:
    if tuple(shape) == x.type.shape:
        return x
    return n.emit(Op.RESHAPE, x, shape=tuple(shape))


def convert_reshape(n: Node) -> Value | Shape:
    if n.opset < 5:
        raise PolyloopError("Reshape before opset 5 (the shape as an attribute) is not "
                            "supported")
    allowzero = n.flag("allowzero", 0)
    if shape_values.involved(n, 0):
        return shape_values.reshape(n)
    x = n.value(0)
    return reshape(n, x, reshape_target(n.sizes, x.type.shape, n.dims(1, "the shape"),
                                        allowzero))


def convert_flatten(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    axis = int(n.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise PolyloopError(f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    first = flat(n.sizes, x.type.shape[:axis], "the flattened leading axes")
    second = flat(n.sizes, x.type.shape[axis:], "the flattened trailing axes")
    return reshape(n, x, (first, second))


def convert_transpose(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    perm = [int(p) for p in n.attr("perm", list(reversed(range(rank))))]
    if sorted(perm) != list(range(rank)):
        raise PolyloopError(f"perm {perm} is not a permutation of the {rank} axes 0 to "
                            f"{rank - 1}")
    if perm == list(range(rank)):
        return x
    return n.emit(Op.PERMUTE, x, axes=perm)


def _axes_arg(n: Node, rank: int, *, attr_before: int) -> list[int] | None:
    """Axes given as an attribute (before opset ``attr_before``) or as input 1."""
    if n.opset < attr_before:
        axes = n.attr("axes")
        return None if axes is None else [int(a) for a in axes]
    return n.ints(1, "the axes") if n.has(1) else None


def convert_squeeze(n: Node) -> Value | Shape:
    if shape_values.involved(n, 0):
        return shape_values.squeeze(n, _axes_arg(n, 1, attr_before=13))
    x = n.value(0)
    shape = x.type.shape
    axes = _axes_arg(n, len(shape), attr_before=13)
    if axes is None:
        axes = [k for k, d in enumerate(shape) if d == 1]
    axes = [normalize(a, len(shape)) for a in axes]
    for a in axes:
        if shape[a] != 1:
            raise PolyloopError(f"cannot squeeze axis {a} of size {shape[a]}")
    return reshape(n, x, tuple(d for k, d in enumerate(shape) if k not in axes))


def convert_unsqueeze(n: Node) -> Value | Shape:
    if shape_values.involved(n, 0):
        return shape_values.unsqueeze(n, _axes_arg(n, 0, attr_before=13))
    x = n.value(0)
    axes = _axes_arg(n, len(x.type.shape), attr_before=13)
    if not axes:
        raise PolyloopError("Unsqueeze needs axes")
    rank = len(x.type.shape) + len(axes)
    axes = sorted(normalize(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise PolyloopError(f"axes {axes} repeat an axis")
    dims = iter(x.type.shape)
    return reshape(n, x, tuple(1 if k in axes else next(dims) for k in range(rank)))


def _empty(n: Node, v: Value) -> bool:
    return n.b.data(v) is not None and n.b.data(v).size == 0


def convert_concat(n: Node) -> Value | Shape:
    if shape_values.involved(n, *range(n.n_inputs)):
        return shape_values.concat(n)
    xs = n.values()
    rank = len(xs[0].type.shape)
    axis = normalize(int(n.attr("axis")), rank)
    full = [x for x in xs if not _empty(n, x)]
    if not full:
        return n.const(np.concatenate([n.b.data(x) for x in xs], axis=axis))
    xs = full
    if len(xs) == 1:
        return n.emit(Op.COPY, xs[0])
    return n.emit(Op.CONCAT, *xs, axis=axis)


def empty_like(n: Node, x: Value, axis: int) -> Value:
    """The empty slice of ``x`` along ``axis``: no elements, a known constant."""
    shape = list(x.type.shape)
    if not all(isinstance(d, int) for d in shape):
        raise PolyloopError(f"an empty slice of a tensor of symbolic shape {shape}")
    shape[axis] = 0
    return n.const(np.zeros(shape, x.type.dtype))


def slice_axis(n: Node, x: Value, axis: int, start: int, count: int, step: int = 1) -> Value:
    shape = x.type.shape
    if count < 1:
        return empty_like(n, x, axis)
    if (start, count, step) == (0, shape[axis], 1):
        return x
    begin = [0] * len(shape)
    steps = [1] * len(shape)
    size = list(shape)
    begin[axis], steps[axis], size[axis] = start, step, count
    return n.emit(Op.SLICE, x, begin=tuple(begin), step=tuple(steps), size=tuple(size))


def convert_split(n: Node) -> tuple[Value, ...]:
    x = n.value(0)
    shape = x.type.shape
    axis = normalize(int(n.attr("axis", 0)), len(shape))
    d = shape[axis]
    if not isinstance(d, int):
        raise PolyloopError(f"cannot split the symbolic axis {axis} ({d})")
    sizes = n.attr("split") if n.opset < 13 else (n.ints(1, "the split sizes") if n.has(1)
                                                   else None)
    outputs = n.n_outputs
    if n.opset >= 18:
        count = n.attr("num_outputs")
        if sizes is None and count is not None:
            outputs = int(count)
            chunk = -(-d // outputs)
            sizes = [min(chunk, d - k * chunk) for k in range(outputs)]
    if sizes is None:
        if d % outputs:
            raise PolyloopError(f"axis {axis} of size {d} does not split into {outputs} equal "
                                "parts")
        sizes = [d // outputs] * outputs
    sizes = [int(s) for s in sizes]
    if sum(sizes) != d or len(sizes) != n.n_outputs or min(sizes) < 0:
        raise PolyloopError(f"split sizes {sizes} do not cover axis {axis} of size {d} with "
                            f"{n.n_outputs} outputs")
    outs, start = [], 0
    for s in sizes:
        outs.append(slice_axis(n, x, axis, start, s))
        start += s
    return tuple(outs)


def convert_slice(n: Node) -> Value | Shape:
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        axes, steps = n.attr("axes"), None
    else:
        starts, ends = n.dims(1, "the starts"), n.dims(2, "the ends")
        axes = n.ints(3, "the axes") if n.has(3) else None
        steps = n.ints(4, "the steps") if n.has(4) else None
    if shape_values.involved(n, 0):
        return shape_values.slice_(n, n.ints(1, "the starts"), n.ints(2, "the ends"), axes,
                                   steps)
    x = n.value(0)
    shape = x.type.shape
    rank = len(shape)
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise PolyloopError("starts, ends, axes and steps need one entry each per sliced axis")
    axes = [normalize(a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise PolyloopError(f"axes {axes} repeat an axis")
    begin, step, size = [0] * rank, [1] * rank, list(shape)
    symbolic = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = shape[a]
        if not all(isinstance(v, int) for v in (d, s, e)):
            symbolic.append((a, s, e, int(st)))
            continue
        first, count = slice_range(int(s), int(e), int(st), d)
        if count < 1:
            return empty_like(n, x, a)
        begin[a], step[a], size[a] = first, int(st), count
    if tuple(size) != shape or any(s != 1 for s in step):
        x = n.emit(Op.SLICE, x, begin=tuple(begin), step=tuple(step), size=tuple(size))
    for a, s, e, st in symbolic:
        x = shape_values.symbolic_slice(n, x, a, s, e, st)
    return x


def broadcast_shapes(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for p, q in zip(a, b):
        if p != q and p != 1 and q != 1:
            raise PolyloopError(f"shapes {a} and {b} cannot be broadcast")
        out.append(q if p == 1 else p)
    return tuple(out)


def convert_expand(n: Node) -> Value:
    x = n.value(0)
    target = broadcast_shapes(x.type.shape, n.dims(1, "the shape"))
    if target == x.type.shape:
        return n.emit(Op.COPY, x)
    return n.emit(Op.BROADCAST_TO, x, shape=target)


def convert_tile(n: Node) -> Value:
    x = n.value(0)
    repeats = n.ints(1, "the repeats")
    if len(repeats) != len(x.type.shape) or min(repeats, default=1) < 1:
        raise PolyloopError(f"repeats {repeats} need one positive count per axis")
    if all(r == 1 for r in repeats):
        return n.emit(Op.COPY, x)
    return n.emit(Op.TILE, x, repeats=tuple(repeats))


_PAD_MODES = {"constant": PadMode.CONSTANT, "reflect": PadMode.REFLECT, "edge": PadMode.EDGE,
              "wrap": PadMode.WRAP}


def convert_pad(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    mode = n.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise PolyloopError(f"pad mode {mode!r} is not one of {', '.join(_PAD_MODES)}")
    if n.opset < 11:
        pads, value = [int(p) for p in n.attr("pads")], float(n.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = n.ints(1, "the pads")
        value = n.array(2, "the constant value").reshape(-1)[0].item() if n.has(2) else 0
        axes = n.ints(3, "the axes") if n.has(3) else list(range(rank))
    axes = [normalize(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise PolyloopError(f"pads {pads} need a begin and an end for each of {len(axes)} axes")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a], full[a + rank] = pads[k], pads[k + len(axes)]
    if not any(full):
        return n.emit(Op.COPY, x)
    return n.emit(Op.PAD, x, pads=tuple(full), mode=_PAD_MODES[mode], value=value)


def convert_shape(n: Node) -> Value | Shape:
    e = n.entry(0)
    shape = ((() if e.scalar else (len(e.dims),)) if isinstance(e, Shape)
             else n.value(0).type.shape)
    rank = len(shape)
    start, end = int(n.attr("start", 0)), n.attr("end")
    end = rank if end is None else int(end)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    dims = shape[start:end]
    if all(isinstance(d, int) for d in dims):
        return n.const(np.array(dims, "int64"))
    return Shape(tuple(dims))


def convert_size(n: Node) -> Value | Shape:
    shape = n.value(0).type.shape
    return shape_values.result(n, (flat(n.sizes, shape, "the element count"),), scalar=True)


def convert_constant_of_shape(n: Node) -> Value:
    dims = n.dims(0, "the shape")
    value = n.attr("value")
    from onnx import numpy_helper
    arr = np.zeros((1,), "float32") if value is None else numpy_helper.to_array(value)
    scalar = n.const(arr.reshape(()))
    if any(isinstance(d, int) and d < 0 for d in dims):
        raise PolyloopError(f"shape {list(dims)} has a negative size")
    if 0 in dims:
        if not all(isinstance(d, int) for d in dims):
            raise PolyloopError(f"an empty tensor of symbolic shape {list(dims)}")
        return n.const(np.zeros(dims, arr.dtype))
    if not dims:
        return n.emit(Op.COPY, scalar)
    return n.emit(Op.BROADCAST_TO, scalar, shape=tuple(dims))


def convert_range(n: Node) -> Value:
    if shape_values.foldable(n, 0, 1, 2):
        return shape_values.range_(n)
    start, limit, delta = (n.array(k, name).reshape(()) for k, name in
                           ((0, "start"), (1, "limit"), (2, "delta")))
    if delta == 0:
        raise PolyloopError("Range's delta must not be 0")
    count = max(int(np.ceil((limit - start) / delta)), 0)
    if count < 1:
        return n.const(np.zeros(0, start.dtype))
    out = start + np.arange(count, dtype=start.dtype) * delta
    return n.const(out.astype(start.dtype))


def _blocks(n: Node, x: Value) -> tuple[int, int, int, int, int]:
    b = int(n.attr("blocksize"))
    if len(x.type.shape) != 4 or b < 1:
        raise PolyloopError("needs (N, C, H, W) data and a positive blocksize")
    nn, c, h, w = x.type.shape
    return nn, c, h, w, b


def convert_depth_to_space(n: Node) -> Value:
    x = n.value(0)
    nn, c, h, w, b = _blocks(n, x)
    if c % (b * b):
        raise PolyloopError(f"{c} channels do not divide by blocksize^2 ({b * b})")
    mode = n.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise PolyloopError(f"mode {mode!r} is not DCR or CRD")
    if mode == "DCR":
        t = reshape(n, x, (nn, b, b, c // (b * b), h, w))
        t = n.emit(Op.PERMUTE, t, axes=[0, 3, 4, 1, 5, 2])
    else:
        t = reshape(n, x, (nn, c // (b * b), b, b, h, w))
        t = n.emit(Op.PERMUTE, t, axes=[0, 1, 4, 2, 5, 3])
    return reshape(n, t, (nn, c // (b * b), h * b, w * b))


def convert_space_to_depth(n: Node) -> Value:
    x = n.value(0)
    nn, c, h, w, b = _blocks(n, x)
    if h % b or w % b:
        raise PolyloopError(f"{h} x {w} does not divide by blocksize {b}")
    mode = n.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise PolyloopError(f"mode {mode!r} is not DCR or CRD")
    t = reshape(n, x, (nn, c, h // b, b, w // b, b))
    t = n.emit(Op.PERMUTE, t, axes=[0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return reshape(n, t, (nn, c * b * b, h // b, w // b))


def convert_identity(n: Node) -> Value | Shape:
    return n.entry(0)


def convert_dropout(n: Node) -> tuple:
    n.attr("seed")
    n.attr("ratio")
    if n.opset < 7 and not n.flag("is_test", 0):
        raise PolyloopError("Dropout in training mode (is_test=0) is not supported")
    if n.has(2) and bool(n.array(2, "training_mode").reshape(-1)[0]):
        raise PolyloopError("Dropout in training mode is not supported (inference only)")
    x = n.entry(0)
    mask = None
    if n.wants(1):
        v = n.value(0)
        mask = n.emit(Op.BROADCAST_TO, n.const(np.array(True)), shape=v.type.shape) \
            if v.type.shape else n.emit(Op.COPY, n.const(np.array(True)))
    return (x, mask)


def convert_constant(n: Node) -> Value:
    from onnx import numpy_helper
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        v = n.attr(key)
        if v is None:
            continue
        if key == "value":
            return n.const(numpy_helper.to_array(v).copy())
        dtype = "float32" if "float" in key else "int64"
        return n.const(np.array(v, dtype))
    raise PolyloopError("Constant with a sparse or string value is not supported")


def convert_eye_like(n: Node) -> Value:
    x = n.value(0)
    if len(x.type.shape) != 2 or not all(isinstance(d, int) for d in x.type.shape):
        raise PolyloopError("EyeLike needs a 2-D input of constant shape")
    dtype = n.attr("dtype")
    dt = x.type.dtype if dtype is None else onnx_dtype(int(dtype), "EyeLike's dtype")
    return n.const(np.eye(*x.type.shape, k=int(n.attr("k", 0)), dtype=dt))


CONVERTERS = {
    "Reshape": convert_reshape, "Flatten": convert_flatten, "Transpose": convert_transpose,
    "Squeeze": convert_squeeze, "Unsqueeze": convert_unsqueeze, "Concat": convert_concat,
    "Split": convert_split, "Slice": convert_slice, "Expand": convert_expand,
    "Tile": convert_tile, "Pad": convert_pad,
    "Shape": convert_shape, "Size": convert_size, "ConstantOfShape": convert_constant_of_shape,
    "Range": convert_range, "DepthToSpace": convert_depth_to_space,
    "SpaceToDepth": convert_space_to_depth, "Identity": convert_identity,
    "Dropout": convert_dropout, "Constant": convert_constant, "EyeLike": convert_eye_like,
}
