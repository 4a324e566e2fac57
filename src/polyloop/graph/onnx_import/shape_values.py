# SPDX-License-Identifier: Apache-2.0
"""Shape arithmetic on shapes that hold size parameters: ``Shape`` of a tensor with a
symbolic batch, then the Gather, Slice, Concat, Unsqueeze, Squeeze and Cast that exporters
put between it and a Reshape, carried as lists of dimensions (``Shape`` entries) instead of
tensors. Anything else done to such a value is refused by name."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Dim, Value
from .dims import normalize, slice_range
from .node import Node, Shape


def involved(n: Node, *ks: int) -> bool:
    """Whether any of inputs ``ks`` is a ``Shape`` entry."""
    return any(n.has(k) and isinstance(n.entry(k), Shape) for k in ks)


def result(n: Node, dims: tuple[Dim, ...], scalar: bool = False) -> Value | Shape:
    """A constant when every dimension is known, else a ``Shape``."""
    if all(isinstance(d, int) for d in dims):
        data = np.array(dims, "int64")
        return n.const(data.reshape(()) if scalar else data)
    return Shape(tuple(dims), scalar)


def dims_of(n: Node, k: int) -> tuple[tuple[Dim, ...], bool]:
    """Input ``k`` as (dimensions, scalar): a ``Shape``, or a constant int64 of rank 0 or 1."""
    e = n.entry(k)
    if isinstance(e, Shape):
        return e.dims, e.scalar
    data = n.array(k, f"input {k}")
    if data.ndim > 1 or data.dtype.kind not in "iu":
        raise PolyloopError(f"input {k} is a {data.dtype} tensor of rank {data.ndim} next to a "
                            "shape; only 1-D integer shapes combine")
    return tuple(int(v) for v in data.reshape(-1)), data.ndim == 0


def gather(n: Node) -> Value | Shape:
    dims, _ = dims_of(n, 0)
    idx = n.array(1, "the indices")
    if idx.ndim > 1 or int(n.attr("axis", 0)) not in (0, -1):
        raise PolyloopError("a Gather from a shape takes a constant index or 1-D indices")
    picked = tuple(dims[normalize(int(i), len(dims), "index")] for i in idx.reshape(-1))
    return result(n, picked, scalar=idx.ndim == 0)


def concat(n: Node) -> Value | Shape:
    n.attr("axis")
    out: list[Dim] = []
    for k in range(n.n_inputs):
        dims, scalar = dims_of(n, k)
        if scalar:
            raise PolyloopError("Concat of a 0-d value")
        out += dims
    return result(n, tuple(out))


def unsqueeze(n: Node, axes: list[int] | None) -> Value | Shape:
    dims, scalar = dims_of(n, 0)
    if not scalar or axes not in ([0], [-1]):
        raise PolyloopError("only a single dimension picked from a shape can be unsqueezed "
                            "(to a 1-D shape)")
    return result(n, dims)


def squeeze(n: Node, axes: list[int] | None) -> Value | Shape:
    dims, scalar = dims_of(n, 0)
    if scalar or len(dims) != 1 or axes not in (None, [0], [-1]):
        raise PolyloopError("only a 1-element shape can be squeezed (to one dimension)")
    return result(n, dims, scalar=True)


def slice_(n: Node, starts, ends, axes, steps) -> Value | Shape:
    dims, scalar = dims_of(n, 0)
    if scalar or len(starts) != 1 or (axes is not None and list(axes) not in ([0], [-1])):
        raise PolyloopError("a Slice of a shape takes one range along its only axis")
    step = int(steps[0]) if steps is not None else 1
    first, count = slice_range(int(starts[0]), int(ends[0]), step, len(dims))
    return result(n, tuple(dims[first + k * step] for k in range(count)))


def cast(n: Node, dtype: str) -> Value | Shape:
    if dtype not in ("int64", "int32"):
        raise PolyloopError(f"a shape holding size parameters cast to {dtype}")
    return n.entry(0)
