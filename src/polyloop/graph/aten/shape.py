# SPDX-License-Identifier: Apache-2.0
"""ATen operators that move data: views, permutations, concatenation, selection, casts."""
from __future__ import annotations

from ..ir import Op, Value
from .context import Call, Unsupported, normalize_axis


def view(c: Call) -> Value:
    """Any call whose result is its input's elements in the same (row-major) order under
    another shape: view, reshape, squeeze, unsqueeze, flatten, clone, contiguous..."""
    x = c.value(0)
    shape = c.out_type().shape
    if shape == x.type.shape and c.node.target.__name__.split(".")[0] in _IDENTITY:
        return x
    return c.emit(Op.RESHAPE, x, shape=shape)


_IDENTITY = {"clone", "alias", "detach", "contiguous", "lift_fresh_copy", "dropout"}


def permute(c: Call) -> Value:
    x = c.value(0)
    rank = len(x.type.shape)
    name = c.node.target.__name__.split(".")[0]
    if name == "permute":
        axes = [normalize_axis(int(a), rank, "dim") for a in c.arg(1, "dims")]
    else:
        axes = list(range(rank))
        if name != "t" or rank == 2:
            d0, d1 = (0, 1) if name == "t" else (normalize_axis(int(c.arg(1)), rank, "dim"),
                                                 normalize_axis(int(c.arg(2)), rank, "dim"))
            axes[d0], axes[d1] = axes[d1], axes[d0]
    if axes == list(range(rank)):
        return x
    return c.emit(Op.PERMUTE, x, axes=axes)


def cat(c: Call) -> Value:
    dtype = c.out_type().dtype
    parts = [c.importer.as_value(t, dtype) for t in c.arg(0, "tensors")]
    parts = [p for p in parts if 0 not in p.type.shape]
    if len(parts) == 1:
        return parts[0]
    rank = len(parts[0].type.shape)
    return c.emit(Op.CONCAT, *parts, axis=normalize_axis(int(c.arg(1, "dim", 0)), rank, "dim"))


def select(c: Call) -> Value:
    x = c.value(0)
    rank = len(x.type.shape)
    axis = normalize_axis(int(c.arg(1, "dim")), rank, "dim")
    size, index = x.type.shape[axis], int(c.arg(2, "index"))
    if not isinstance(size, int):
        raise Unsupported("select along a symbolic axis")
    return c.emit(Op.SELECT, x, axis=axis, index=index % size)


def unbind(c: Call) -> tuple:
    x = c.value(0)
    axis = normalize_axis(int(c.arg(1, "dim", 0)), len(x.type.shape), "dim")
    size = x.type.shape[axis]
    if not isinstance(size, int):
        raise Unsupported("unbind along a symbolic axis")
    return tuple(c.emit(Op.SELECT, x, axis=axis, index=k, name=f"{c.name}_{k}")
                 for k in range(size))


SHAPE = {
    **{name: view for name in ("view", "_unsafe_view", "reshape", "squeeze", "unsqueeze",
                               "flatten", "unflatten", "clone", "alias", "detach",
                               "contiguous", "lift_fresh_copy", "dropout", "expand_as")},
    "permute": permute, "transpose": permute, "t": permute,
    "cat": cat, "select": select, "unbind": unbind,
}
