# SPDX-License-Identifier: Apache-2.0
"""ONNX operators that index: gathers and scatters (constant indices checked at import),
one-hot, triangles and cumulative sums."""
from __future__ import annotations

from ...errors import PolyloopError
from ..ir import Dim, Op, Value
from ..kinds import ScatterFn
from . import shape_values
from .convert_tensor import reshape
from .dims import normalize
from .node import Node, Shape


def _check_indices(n: Node, idx: Value, size: Dim, what: str) -> None:
    data = n.b.data(idx)
    if data is not None and isinstance(size, int) and data.size and (
            data.min() < -size or data.max() >= size):
        raise PolyloopError(f"{what} has indices in [{data.min()}, {data.max()}], outside "
                            f"[-{size}, {size})")


def convert_gather(n: Node) -> Value | Shape:
    if shape_values.involved(n, 0):
        return shape_values.gather(n)
    x, idx = n.value(0), n.value(1)
    axis = normalize(int(n.attr("axis", 0)), len(x.type.shape))
    _check_indices(n, idx, x.type.shape[axis], "Gather")
    return n.emit(Op.GATHER, x, idx, axis=axis)


def convert_gather_elements(n: Node) -> Value:
    x, idx = n.value(0), n.value(1)
    axis = normalize(int(n.attr("axis", 0)), len(x.type.shape))
    _check_indices(n, idx, x.type.shape[axis], "GatherElements")
    return n.emit(Op.GATHER_ELEMENTS, x, idx, axis=axis)


def convert_gather_nd(n: Node) -> Value:
    return n.emit(Op.GATHER_ND, n.value(0), n.value(1), batch_dims=int(n.attr("batch_dims", 0)))


def convert_one_hot(n: Node) -> Value:
    idx, values = n.value(0), n.value(2)
    depth = int(n.array(1, "the depth").reshape(-1)[0])
    if idx.type.dtype not in ("int32", "int64"):
        idx = n.emit(Op.CAST, idx, dtype="int64")
    rank = len(idx.type.shape) + 1
    axis = normalize(int(n.attr("axis", -1)), rank)
    values = reshape(n, values, (2,))
    return n.emit(Op.ONE_HOT, idx, values, depth=depth, axis=axis)


def convert_trilu(n: Node) -> Value:
    k = int(n.array(1, "k").reshape(-1)[0]) if n.has(1) else 0
    return n.emit(Op.TRILU, n.value(0), upper=n.flag("upper", 1), k=k)


def convert_cumsum(n: Node) -> Value:
    x = n.value(0)
    axis = normalize(int(n.array(1, "the axis").reshape(-1)[0]), len(x.type.shape))
    return n.emit(Op.CUMSUM, x, axis=axis, exclusive=n.flag("exclusive", 0),
                  reverse=n.flag("reverse", 0))


_SCATTER = {m.value: m for m in ScatterFn}


def _scatter_fn(n: Node) -> ScatterFn:
    fn = n.attr("reduction", "none")
    if fn not in _SCATTER:
        raise PolyloopError(f"reduction {fn!r} is not one of {', '.join(_SCATTER)}")
    return _SCATTER[fn]


def convert_scatter_elements(n: Node) -> Value:
    x, idx, upd = n.value(0), n.value(1), n.value(2)
    axis = normalize(int(n.attr("axis", 0)), len(x.type.shape))
    _check_indices(n, idx, x.type.shape[axis], n.op_type)
    return n.emit(Op.SCATTER_ELEMENTS, x, idx, upd, axis=axis, fn=_scatter_fn(n))


def convert_scatter_nd(n: Node) -> Value:
    return n.emit(Op.SCATTER_ND, n.value(0), n.value(1), n.value(2), fn=_scatter_fn(n))


CONVERTERS = {
    "Gather": convert_gather, "GatherElements": convert_gather_elements,
    "GatherND": convert_gather_nd, "ScatterElements": convert_scatter_elements,
    "Scatter": convert_scatter_elements, "ScatterND": convert_scatter_nd,
    "OneHot": convert_one_hot, "Trilu": convert_trilu, "CumSum": convert_cumsum,
}
