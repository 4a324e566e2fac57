# SPDX-License-Identifier: Apache-2.0
"""Shape and dtype rules of the general elementwise, reduction and data-movement operators
(see ``Op``'s docstring for what each computes)."""
from __future__ import annotations

from collections.abc import Callable

from .ir import Dim, Op, TensorType
from .kinds import BinaryFn, ReduceFn, UnaryFn
from .shape_util import _fail, broadcast, normalize_axes, normalize_axis, static
from .shapes_nn import NN_RULES

Attrs = dict[str, object]
FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
INTS = frozenset({"int8", "uint8", "int16", "int32", "int64"})
DTYPES = FLOATS | INTS | {"bool"}

# Unary functions defined on integers (and floats); NOT is the one for bools.
_INT_UNARY = frozenset({UnaryFn.ABS, UnaryFn.NEG, UnaryFn.SIGN, UnaryFn.RELU, UnaryFn.CLIP,
                        UnaryFn.BITWISE_NOT})
_BOOL_RESULT = frozenset({UnaryFn.ISNAN, UnaryFn.ISINF})


def _unary(op: Op, types, attrs) -> TensorType:
    x = types[0]
    fn = attrs.get("fn")
    if not isinstance(fn, UnaryFn):
        raise _fail(op, types, f"fn must be a UnaryFn, got {fn!r}")
    ok = (x.dtype == "bool") if fn is UnaryFn.NOT else \
        (x.dtype in INTS) if fn is UnaryFn.BITWISE_NOT else \
        (x.dtype in FLOATS or (fn in _INT_UNARY and x.dtype in INTS))
    if not ok:
        raise _fail(op, types, f"{fn} is not defined on {x.dtype} tensors")
    return TensorType(x.shape, "bool" if fn in _BOOL_RESULT else x.dtype)


_LOGICAL = frozenset({BinaryFn.AND, BinaryFn.OR, BinaryFn.XOR})
_BITWISE = frozenset({BinaryFn.BITAND, BinaryFn.BITOR, BinaryFn.BITXOR, BinaryFn.SHIFT_LEFT,
                      BinaryFn.SHIFT_RIGHT})


def _binary(op: Op, types, attrs) -> TensorType:
    a, b = types
    fn = attrs.get("fn")
    if not isinstance(fn, BinaryFn):
        raise _fail(op, types, f"fn must be a BinaryFn, got {fn!r}")
    if fn is not BinaryFn.POW and a.dtype != b.dtype:
        raise _fail(op, types, f"{fn} needs operands of one dtype; cast one of them")
    if fn in _LOGICAL and a.dtype != "bool":
        raise _fail(op, types, f"{fn} combines bool tensors")
    if fn in _BITWISE and a.dtype not in INTS:
        raise _fail(op, types, f"{fn} takes integer tensors")
    if fn not in _LOGICAL and not fn.is_comparison and a.dtype == "bool" or \
            fn in (BinaryFn.POW, BinaryFn.PRELU) and a.dtype not in FLOATS | INTS or \
            fn is BinaryFn.POW and b.dtype not in FLOATS | INTS:
        raise _fail(op, types, f"{fn} is not defined on {a.dtype} tensors")
    return TensorType(broadcast(op, types), "bool" if fn.is_comparison else a.dtype)


def _where(op: Op, types, attrs) -> TensorType:
    c, a, b = types
    if c.dtype != "bool" or a.dtype != b.dtype:
        raise _fail(op, types, "where takes a bool condition and two values of one dtype")
    return TensorType(broadcast(op, types), a.dtype)


def _cast(op: Op, types, attrs) -> TensorType:
    dtype = attrs.get("dtype")
    if dtype not in DTYPES:
        raise _fail(op, types, f"cannot cast to {dtype!r}; the graph carries "
                    f"{', '.join(sorted(DTYPES))}")
    return TensorType(types[0].shape, str(dtype))


_FLOAT_REDUCE = frozenset({ReduceFn.MEAN, ReduceFn.L2, ReduceFn.LOG_SUM, ReduceFn.LOG_SUM_EXP})


def _reduce(op: Op, types, attrs) -> TensorType:
    x = types[0]
    fn = attrs.get("fn")
    if not isinstance(fn, ReduceFn):
        raise _fail(op, types, f"fn must be a ReduceFn, got {fn!r}")
    if x.dtype == "bool" or fn in _FLOAT_REDUCE and x.dtype not in FLOATS:
        raise _fail(op, types, f"reduce {fn} is not defined on {x.dtype} tensors")
    axes = normalize_axes(op, types, attrs.get("axes", ()), len(x.shape))
    keep = bool(attrs.get("keepdims", False))
    shape = tuple(1 if k in axes else d for k, d in enumerate(x.shape)) if keep else \
        tuple(d for k, d in enumerate(x.shape) if k not in axes)
    return TensorType(shape, x.dtype)


def _arg_reduce(op: Op, types, attrs) -> TensorType:
    x = types[0]
    if x.dtype == "bool":
        raise _fail(op, types, "arg_reduce is not defined on bool tensors")
    axis = normalize_axis(op, types, attrs.get("axis", 0), len(x.shape))
    keep = bool(attrs.get("keepdims", False))
    shape = x.shape[:axis] + ((1,) if keep else ()) + x.shape[axis + 1:]
    return TensorType(shape, "int64")


def _cumsum(op: Op, types, attrs) -> TensorType:
    x = types[0]
    if x.dtype == "bool":
        raise _fail(op, types, "cumsum is not defined on bool tensors")
    normalize_axis(op, types, attrs.get("axis", 0), len(x.shape))
    return x


def _per_axis(op: Op, types, attrs, *keys: str) -> list[tuple]:
    rank = len(types[0].shape)
    values = [tuple(attrs.get(k, ())) for k in keys]
    for k, v in zip(keys, values):
        if len(v) != rank:
            raise _fail(op, types, f"{k} needs one entry per axis ({rank}), got {v}")
    return values


def _slice(op: Op, types, attrs) -> TensorType:
    x = types[0]
    begin, step, size = _per_axis(op, types, attrs, "begin", "step", "size")
    for k, (d, b, s, n) in enumerate(zip(x.shape, begin, step, size)):
        if (b, s, n) == (0, 1, d):
            continue
        d = static(op, types, d, f"sliced axis {k}")
        if not (isinstance(n, int) and n >= 1 and isinstance(s, int) and s != 0
                and 0 <= b < d and 0 <= b + (n - 1) * s < d):
            raise _fail(op, types, f"axis {k}: {n} elements from {b} by {s} leave [0, {d})")
    return TensorType(tuple(size), x.dtype)


def _pad(op: Op, types, attrs) -> TensorType:
    x = types[0]
    rank = len(x.shape)
    pads = tuple(attrs.get("pads", ()))
    if len(pads) != 2 * rank or not all(isinstance(p, int) for p in pads):
        raise _fail(op, types, f"pads needs {2 * rank} integers (begins then ends), got {pads}")
    shape: list[Dim] = []
    for k, d in enumerate(x.shape):
        b, e = pads[k], pads[k + rank]
        if b == e == 0:
            shape.append(d)
            continue
        d = static(op, types, d, f"padded axis {k}")
        mode = str(attrs.get("mode", "constant"))
        kept = d - max(-b, 0) - max(-e, 0)     # what is left after negative pads crop
        if d + b + e < 1 or mode != "constant" and kept < 1 or \
                mode == "reflect" and max(b, e) >= kept or mode == "wrap" and max(b, e) > kept:
            raise _fail(op, types, f"axis {k} of size {d} cannot take pads ({b}, {e}) in "
                        f"{mode} mode")
        shape.append(d + b + e)
    return TensorType(tuple(shape), x.dtype)


def _broadcast_to(op: Op, types, attrs) -> TensorType:
    x = types[0]
    shape = tuple(attrs.get("shape", ()))
    if len(shape) < len(x.shape) or broadcast(op, (x, TensorType(shape))) != shape:
        raise _fail(op, types, f"cannot broadcast to {shape}")
    return TensorType(shape, x.dtype)


def _tile(op: Op, types, attrs) -> TensorType:
    x = types[0]
    (repeats,) = _per_axis(op, types, attrs, "repeats")
    shape: list[Dim] = []
    for k, (d, r) in enumerate(zip(x.shape, repeats)):
        if not isinstance(r, int) or r < 1:
            raise _fail(op, types, f"repeats must be positive integers, got {repeats}")
        shape.append(d if r == 1 else static(op, types, d, f"tiled axis {k}") * r)
    return TensorType(tuple(shape), x.dtype)


def _index_type(op: Op, types, t: TensorType) -> None:
    if t.dtype not in ("int32", "int64"):
        raise _fail(op, types, f"indices must be int32 or int64, got {t.dtype}")


def _gather(op: Op, types, attrs) -> TensorType:
    x, idx = types
    _index_type(op, types, idx)
    axis = normalize_axis(op, types, attrs.get("axis", 0), len(x.shape))
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _gather_elements(op: Op, types, attrs) -> TensorType:
    x, idx = types
    _index_type(op, types, idx)
    if len(idx.shape) != len(x.shape):
        raise _fail(op, types, "indices need the rank of the data")
    normalize_axis(op, types, attrs.get("axis", 0), len(x.shape))
    return TensorType(idx.shape, x.dtype)


def _gather_nd(op: Op, types, attrs) -> TensorType:
    x, idx = types
    _index_type(op, types, idx)
    b = attrs.get("batch_dims", 0)
    m = idx.shape[-1] if idx.shape else None
    if not isinstance(m, int) or not isinstance(b, int) or b < 0 or b + m > len(x.shape) \
            or len(idx.shape) <= b or x.shape[:b] != idx.shape[:b]:
        raise _fail(op, types, f"gather_nd with batch_dims={b} needs indices[..., m] with the "
                    "data's batch axes and b + m <= the data's rank")
    return TensorType(idx.shape[:-1] + x.shape[b + m:], x.dtype)


def _one_hot(op: Op, types, attrs) -> TensorType:
    idx, values = types
    _index_type(op, types, idx)
    depth = attrs.get("depth")
    if not isinstance(depth, int) or depth < 1 or values.shape not in ((2,),):
        raise _fail(op, types, f"one_hot needs a positive depth (got {depth!r}) and values of "
                    "shape (2,)")
    rank = len(idx.shape) + 1
    axis = normalize_axis(op, types, attrs.get("axis", -1), rank)
    return TensorType(idx.shape[:axis] + (depth,) + idx.shape[axis:], values.dtype)


def _trilu(op: Op, types, attrs) -> TensorType:
    if len(types[0].shape) < 2:
        raise _fail(op, types, "trilu needs a tensor of rank 2 or more")
    return types[0]


def _scatter_elements(op: Op, types, attrs) -> TensorType:
    x, idx, upd = types
    _index_type(op, types, idx)
    axis = normalize_axis(op, types, attrs.get("axis", 0), len(x.shape))
    if idx.shape != upd.shape or len(idx.shape) != len(x.shape) or upd.dtype != x.dtype or any(
            not isinstance(u, int) or not isinstance(d, int) or (k != axis and u > d)
            for k, (u, d) in enumerate(zip(idx.shape, x.shape))):
        raise _fail(op, types, "scatter_elements needs indices and updates of one constant "
                    "shape, the data's rank, within the data on every other axis")
    return x


def _scatter_nd(op: Op, types, attrs) -> TensorType:
    x, idx, upd = types
    _index_type(op, types, idx)
    k = idx.shape[-1] if idx.shape else None
    if not isinstance(k, int) or k > len(x.shape) or upd.dtype != x.dtype \
            or upd.shape != idx.shape[:-1] + x.shape[k:] \
            or not all(isinstance(d, int) for d in idx.shape + x.shape):
        raise _fail(op, types, "scatter_nd needs indices (..., k) and updates of shape "
                    "indices.shape[:-1] + data.shape[k:], all constant")
    return x


def _topk(op: Op, types, attrs) -> TensorType:
    x = types[0]
    axis = normalize_axis(op, types, attrs.get("axis", -1), len(x.shape))
    k = attrs.get("k")
    d = static(op, types, x.shape[axis], "the sorted axis")
    if x.dtype == "bool" or not isinstance(k, int) or not 1 <= k <= d:
        raise _fail(op, types, f"topk needs a numeric tensor and 1 <= k <= {d}, got k={k!r}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return TensorType(shape, "int64" if attrs.get("indices") else x.dtype)


_WIDTH = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "float16": 2, "bfloat16": 2,
          "int32": 4, "float32": 4, "int64": 8, "float64": 8}


def _bitcast(op: Op, types, attrs) -> TensorType:
    x, dtype = types[0], attrs.get("dtype")
    if dtype not in DTYPES or _WIDTH[str(dtype)] != _WIDTH[x.dtype] or "bool" in (dtype, x.dtype):
        raise _fail(op, types, f"bitcast to {dtype!r} needs a numeric dtype of the same width")
    return TensorType(x.shape, str(dtype))


def _det(op: Op, types, attrs) -> TensorType:
    x = types[0]
    n = x.shape[-1] if len(x.shape) >= 2 else None
    if x.dtype not in FLOATS or n != x.shape[-2] or not isinstance(n, int) or not 1 <= n <= 5:
        raise _fail(op, types, "det takes float square matrices of at most 5 x 5 (..., n, n)")
    return TensorType(x.shape[:-2], x.dtype)


GENERAL_RULES: dict[Op, Callable[[Op, tuple, Attrs], TensorType]] = {
    Op.UNARY: _unary, Op.BINARY: _binary, Op.WHERE: _where, Op.CAST: _cast,
    Op.REDUCE: _reduce, Op.ARG_REDUCE: _arg_reduce, Op.CUMSUM: _cumsum, Op.SLICE: _slice,
    Op.PAD: _pad, Op.BROADCAST_TO: _broadcast_to, Op.TILE: _tile, Op.GATHER: _gather,
    Op.GATHER_ELEMENTS: _gather_elements, Op.GATHER_ND: _gather_nd, Op.ONE_HOT: _one_hot,
    Op.TRILU: _trilu, Op.TOPK: _topk, Op.BITCAST: _bitcast, Op.DET: _det, Op.SCATTER_ELEMENTS: _scatter_elements, Op.SCATTER_ND: _scatter_nd,
    **NN_RULES,
}
