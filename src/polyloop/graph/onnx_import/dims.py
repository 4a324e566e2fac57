# SPDX-License-Identifier: Apache-2.0
"""Arithmetic on shapes whose dimensions are ints or size-parameter names: products as
monomials (``12 * batch * seq``), the ``-1`` of a reshape, ONNX's slice bounds and axes."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ...errors import PolyloopError
from ..ir import Dim


def product(dims: Sequence[Dim]) -> tuple[int, Counter]:
    """The product of ``dims`` as (constant factor, size parameters with multiplicity)."""
    coef, params = 1, Counter()
    for d in dims:
        if isinstance(d, str):
            params[d] += 1
        else:
            coef *= int(d)
    return coef, params


def as_dim(coef: int, params: Counter, what: str) -> Dim:
    """A monomial as one dimension: an int, or one size parameter alone."""
    names = list(params.elements())
    if not names:
        return coef
    if len(names) == 1 and coef == 1:
        return names[0]
    raise PolyloopError(f"{what} would be {coef} x {' x '.join(names)}; a dimension is a "
                        "constant or one size parameter")


def reshape_target(src: Sequence[Dim], target: Sequence[Dim], allowzero: bool) -> tuple[Dim, ...]:
    """ONNX Reshape's output shape: 0 copies the input's dimension (unless ``allowzero``),
    one -1 takes what is left; the element counts must agree."""
    out: list[Dim] = []
    for k, d in enumerate(target):
        if isinstance(d, int) and d == 0 and not allowzero:
            if k >= len(src):
                raise PolyloopError(f"shape {list(target)} copies dimension {k} (a 0) that the "
                                    f"input of rank {len(src)} does not have")
            d = src[k]
        if isinstance(d, int) and d < -1:
            raise PolyloopError(f"shape {list(target)} has the negative size {d}")
        out.append(d)
    if out.count(-1) > 1:
        raise PolyloopError(f"shape {list(target)} has more than one -1")
    have_c, have_p = product(src)
    if -1 in out:
        k = out.index(-1)
        rest_c, rest_p = product([d for d in out if d != -1])
        if rest_c == 0 or have_c % rest_c or rest_p - have_p:
            raise PolyloopError(f"cannot reshape {list(src)} to {list(target)}: the other "
                                "dimensions do not divide the element count")
        out[k] = as_dim(have_c // rest_c, have_p - rest_p, f"the -1 of shape {list(target)}")
    out_c, out_p = product(out)
    if out_c != have_c or out_p != have_p:
        raise PolyloopError(f"cannot reshape {list(src)} to {list(target)}: the element counts "
                            "differ")
    return tuple(out)


def normalize(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise PolyloopError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def slice_range(start: int, end: int, step: int, size: int) -> tuple[int, int]:
    """(first index, count) of ONNX Slice on an axis of ``size``."""
    if step == 0:
        raise PolyloopError("a slice step must not be 0")
    if start < 0:
        start += size
    if end < 0:
        end += size
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
        count = max(0, -(-(end - start) // step))
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
        count = max(0, -(-(start - end) // -step))
    return start, count
