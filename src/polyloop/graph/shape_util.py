# SPDX-License-Identifier: Apache-2.0
"""What the shape rules share: the error that names the operator, NumPy broadcasting, axis
normalisation."""
from __future__ import annotations

from collections.abc import Sequence

from ..errors import PolyloopError
from .ir import Dim, Op, TensorType


def _fail(op: Op, types: tuple[TensorType, ...], rule: str) -> PolyloopError:
    got = ", ".join(str(t) for t in types)
    return PolyloopError(f"{op}({got}): {rule}")


def broadcast(op: Op, types: tuple[TensorType, ...]) -> tuple[Dim, ...]:
    """NumPy broadcasting of the shapes; a size parameter matches itself or 1."""
    ndim = max(len(t.shape) for t in types)
    out: list[Dim] = []
    for k in range(ndim):
        dims = {t.shape[k - ndim + len(t.shape)] for t in types if k - ndim + len(t.shape) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise _fail(op, types, f"dimension {k} cannot be broadcast ({sorted(map(str, dims))}"
                        "); sizes must be equal or 1")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(op: Op, types: tuple[TensorType, ...], axis: object, rank: int) -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative axis, else an error naming ``op``."""
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
        raise _fail(op, types, f"axis {axis!r} is out of range for rank {rank}; give an axis "
                    f"in [{-rank}, {rank})")
    return axis % rank


def normalize_axes(op: Op, types: tuple[TensorType, ...], axes: Sequence[object],
                   rank: int) -> tuple[int, ...]:
    """Each axis normalised; a repeated axis is an error."""
    out = tuple(normalize_axis(op, types, a, rank) for a in axes)
    if len(set(out)) != len(out):
        raise _fail(op, types, f"axes {tuple(axes)} repeat an axis; give each axis once")
    return out


def static(op: Op, types: tuple[TensorType, ...], d: Dim, what: str) -> int:
    """``d`` when it is a constant size, else an error."""
    if not isinstance(d, int):
        raise _fail(op, types, f"{what} must be a constant size, got the size parameter {d!r}")
    return d
