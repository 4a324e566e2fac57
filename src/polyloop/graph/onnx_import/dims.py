# SPDX-License-Identifier: Apache-2.0
"""Arithmetic on shapes whose dimensions are ints or size-parameter names: products of sizes
(``batch*seq``, a derived size parameter), the ``-1`` of a reshape, ONNX's slice bounds and
axes."""
from __future__ import annotations

from collections.abc import Sequence

from ...errors import PolyloopError
from ..ir import Dim
from ..torch_sizes import SizeNames


def product(sizes: SizeNames, dims: Sequence[Dim]):
    """The product of ``dims``: an int when they are all constants, else a sympy expression
    in the named sizes (a derived size stands for its expression)."""
    if all(isinstance(d, int) for d in dims):
        total = 1
        for d in dims:
            total *= int(d)
        return total
    import sympy
    return sympy.expand(sympy.Mul(*(sizes.expression(d) for d in dims)))


def as_dim(sizes: SizeNames, expr: object, what: str) -> Dim:
    """A size computed from the named ones as one dimension: an int, a named size, or a
    derived size parameter (``batch*seq``) the executor computes at call time."""
    if isinstance(expr, int):
        return expr
    try:
        return sizes.dim(expr)
    except PolyloopError as e:
        raise PolyloopError(f"{what}: {e}") from None


def flat(sizes: SizeNames, dims: Sequence[Dim], what: str) -> Dim:
    """The dimension of ``dims`` flattened into one."""
    return as_dim(sizes, product(sizes, dims), what)


def reshape_target(sizes: SizeNames, src: Sequence[Dim], target: Sequence[Dim],
                   allowzero: bool) -> tuple[Dim, ...]:
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
    have = product(sizes, src)
    if -1 in out:
        k = out.index(-1)
        rest = product(sizes, [d for d in out if d != -1])
        out[k] = as_dim(sizes, _quotient(have, rest, src, target), f"the -1 of shape "
                        f"{list(target)}")
    if not _equal(product(sizes, out), have):
        raise PolyloopError(f"cannot reshape {list(src)} to {list(target)}: the element counts "
                            "differ")
    return tuple(out)


def _quotient(have: object, rest: object, src: Sequence[Dim], target: Sequence[Dim]) -> object:
    """``have / rest`` when it divides exactly (a polynomial in the sizes), else an error."""
    if isinstance(have, int) and isinstance(rest, int):
        if rest != 0 and have % rest == 0:
            return have // rest
    elif rest != 0:
        import sympy
        q = sympy.cancel(sympy.sympify(have) / rest)
        if sympy.fraction(q)[1] == 1:
            return sympy.expand(q)
    raise PolyloopError(f"cannot reshape {list(src)} to {list(target)}: the other "
                        "dimensions do not divide the element count")


def _equal(a: object, b: object) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy
    return sympy.expand(a - b) == 0


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
