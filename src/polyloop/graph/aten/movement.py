# SPDX-License-Identifier: Apache-2.0
"""ATen operators that select, pad, broadcast or index data, and the tensors built from sizes
alone (``arange``, ``full``) when a size is symbolic (with fixed sizes they are computed at
import)."""
from __future__ import annotations

from ..ir import Op, Value
from ..kinds import PadMode
from .context import Call, Unsupported, normalize_axis
from .math import cast



def expand(c: Call) -> Value:
    x = c.value(0)
    shape = c.out_type().shape
    if shape == x.type.shape:
        return x
    return c.emit(Op.BROADCAST_TO, x, shape=shape)


def slice_(c: Call) -> Value:
    """``slice(x, dim, start, end, step)`` on a fixed-size axis (or the whole of any axis)."""
    x = c.value(0)
    rank = len(x.type.shape)
    axis = normalize_axis(int(c.arg(1, "dim", 0)), rank, "dim")
    out = c.out_type().shape
    if out == x.type.shape:
        return x
    size, step = x.type.shape[axis], int(c.arg(4, "step", 1))
    start = c.arg(2, "start")
    start = 0 if start is None else start
    if isinstance(size, int) and isinstance(start, int) and not isinstance(out[axis], int):
        return _symbolic_slice(c, x, axis, start, step, out)
    if not isinstance(size, int) or not isinstance(start, int) or not isinstance(out[axis], int):
        raise Unsupported("a slice of a symbolic axis that is not the whole axis")
    start = min(max(start + size if start < 0 else start, 0), size)
    begin = [0] * rank
    steps = [1] * rank
    begin[axis], steps[axis] = start, step
    return c.emit(Op.SLICE, x, begin=tuple(begin), step=tuple(steps), size=out)


def _symbolic_slice(c: Call, x: Value, axis: int, start: int, step: int, out) -> Value:
    """A slice of symbolic length of a fixed-size axis (the first ``seq`` rows of a position
    table): a gather at ``start + step * arange(length)``; the length may be at most what the
    axis holds from ``start`` (checked at call time)."""
    size = x.type.shape[axis]
    start = min(max(start + size if start < 0 else start, 0), size)
    c.importer.sizes.bound(out[axis], high=-(-(size - start) // step))
    idx = c.b.arange(out[axis], "int64", start, step, name=c.name)
    return c.emit(Op.GATHER, x, idx, axis=axis)


def split(c: Call) -> tuple:
    """``split_with_sizes``/``split``: consecutive slices along one axis."""
    x = c.value(0)
    rank = len(x.type.shape)
    axis = normalize_axis(int(c.arg(2, "dim", 0)), rank, "dim")
    parts, start = [], 0
    for k, t in enumerate(c.importer.result_types(c.node)):
        n = t.shape[axis]
        if not isinstance(n, int):
            raise Unsupported("a split along a symbolic axis")
        begin = [0] * rank
        begin[axis] = start
        parts.append(c.emit(Op.SLICE, x, begin=tuple(begin), step=(1,) * rank, size=t.shape,
                            name=f"{c.name}_{k}") if t.shape != x.type.shape else x)
        start += n
    return tuple(parts)


def index_select(c: Call) -> Value:
    x = c.value(0)
    axis = normalize_axis(int(c.arg(1, "dim")), len(x.type.shape), "dim")
    return c.emit(Op.GATHER, x, c.value(2, dtype="int64"), axis=axis)


def gather(c: Call) -> Value:
    x = c.value(0)
    axis = normalize_axis(int(c.arg(1, "dim")), len(x.type.shape), "dim")
    return c.emit(Op.GATHER_ELEMENTS, x, c.value(2, dtype="int64"), axis=axis)


def index(c: Call) -> Value:
    """``x[..., idx, ...]`` with one index tensor (the other axes whole)."""
    x = c.value(0)
    indices = c.arg(1, "indices")
    given = [k for k, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        raise Unsupported("indexing with several index tensors")
    idx = c.importer.as_value(indices[given[0]], "int64")
    if idx.type.dtype == "bool":
        raise Unsupported("indexing with a bool mask (data-dependent size)")
    return c.emit(Op.GATHER, x, idx, axis=given[0])


def constant_pad(c: Call) -> Value:
    """``constant_pad_nd(x, pad, value)``: ``pad`` = (begin, end) pairs from the last axis."""
    return _pad(c, PadMode.CONSTANT, float(c.arg(2, "value", 0.0)))


def _pad(c: Call, mode: PadMode, value: float = 0.0) -> Value:
    x = c.value(0)
    rank = len(x.type.shape)
    pad = [int(p) for p in c.arg(1, "pad" if mode is PadMode.CONSTANT else "padding")]
    begins, ends = [0] * rank, [0] * rank
    for k in range(len(pad) // 2):
        begins[rank - 1 - k], ends[rank - 1 - k] = pad[2 * k], pad[2 * k + 1]
    if not any(begins) and not any(ends):
        return x
    return c.emit(Op.PAD, x, pads=tuple(begins + ends), mode=mode, value=value)


def cumsum(c: Call) -> Value:
    x = cast(c, c.value(0), c.out_type().dtype)
    axis = normalize_axis(int(c.arg(1, "dim")), len(x.type.shape), "dim")
    return c.emit(Op.CUMSUM, x, axis=axis)


def repeat(c: Call) -> Value:
    x = c.value(0)
    reps = [int(r) for r in c.arg(1, "repeats")]
    rank = len(x.type.shape)
    if len(reps) > rank:
        x = c.emit(Op.RESHAPE, x, shape=(1,) * (len(reps) - rank) + x.type.shape,
                   name=f"{c.name}_rank")
    return c.emit(Op.TILE, x, repeats=tuple(reps))


def as_strided(c: Call) -> Value:
    """``as_strided`` that reads its (contiguous) input in order: a reshape."""
    x = c.value(0)
    shape = c.out_type().shape
    strides, offset = c.arg(2, "stride"), c.arg(3, "storage_offset", 0) or 0
    expected, step = [], 1
    for d in reversed(shape):
        expected.insert(0, step)
        step = step * d if isinstance(d, int) else None
        if step is None:
            raise Unsupported("as_strided over symbolic sizes")
    if offset or any(s != e for s, e, d in zip(strides, expected, shape) if d != 1):
        raise Unsupported("as_strided that is not a contiguous view")
    return c.emit(Op.RESHAPE, x, shape=shape)


def triangle(c: Call) -> Value:
    upper = c.node.target.__name__.startswith("triu")
    return c.emit(Op.TRILU, c.value(0), upper=upper, k=int(c.arg(1, "diagonal", 0)))


def arange(c: Call) -> Value:
    """``arange(start, end, step)`` of a symbolic length: a running sum of ones."""
    t = c.out_type()
    name = c.node.target.__name__
    if name.startswith("arange.start"):
        start, step = c.arg(0, "start"), c.arg(2, "step", 1)
    else:
        start, step = 0, 1
    if not isinstance(start, (int, float)) or not isinstance(step, (int, float)):
        raise Unsupported("arange with a symbolic start or step")
    return c.b.arange(t.shape[0], t.dtype, start, step, name=c.name)


def full(c: Call) -> Value:
    """``full``/``ones``/``zeros``/``*_like``/``scalar_tensor`` of a symbolic shape."""
    t = c.out_type()
    name = c.node.target.__name__.split(".")[0]
    fill = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0,
            "new_zeros": 0}.get(name)
    if fill is None:
        fill = c.arg(1, "fill_value") if name in ("full", "full_like") else \
            c.arg(2, "fill_value") if name == "new_full" else c.arg(0)
    if not isinstance(fill, (bool, int, float)):
        raise Unsupported(f"{name} with a fill value that is not a number")
    return c.emit(Op.BROADCAST_TO, c.constant(fill, t.dtype), shape=t.shape)


MOVEMENT = {
    "expand": expand, "slice": slice_, "split_with_sizes": split, "split": split,
    "index_select": index_select, "gather": gather, "index": index,
    "_unsafe_index": index, "constant_pad_nd": constant_pad,
    "reflection_pad1d": lambda c: _pad(c, PadMode.REFLECT),
    "reflection_pad2d": lambda c: _pad(c, PadMode.REFLECT),
    "replication_pad2d": lambda c: _pad(c, PadMode.EDGE), "cumsum": cumsum,
    "repeat": repeat, "as_strided": as_strided, "triu": triangle, "tril": triangle,
    "arange": arange, **{n: full for n in ("full", "ones", "zeros", "full_like", "ones_like",
                                            "zeros_like", "new_ones", "new_zeros", "new_full",
                                            "scalar_tensor")},
}
