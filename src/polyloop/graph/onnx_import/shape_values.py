# SPDX-License-Identifier: Apache-2.0
"""Shape arithmetic on shapes that hold size parameters: ``Shape`` of a tensor with a
symbolic batch, then the Gather, Slice, Concat, Unsqueeze, Squeeze and Cast that exporters
put between it and a Reshape, carried as lists of dimensions (``Shape`` entries) instead of
tensors. Anything else done to such a value is refused by name."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Dim, Op, Value
from .dims import as_dim, normalize, slice_range
from .node import Node, Shape


def involved(n: Node, *ks: int) -> bool:
    """Whether any of inputs ``ks`` is a ``Shape`` entry."""
    return any(n.has(k) and isinstance(n.entry(k), Shape) for k in ks)


def foldable(n: Node, *ks: int) -> bool:
    """Whether inputs ``ks`` hold a ``Shape`` entry and otherwise only constants: the result
    is computed at import."""
    return involved(n, *ks) and all(isinstance(n.entry(k), Shape) or
                                    n.b.data(n.entry(k)) is not None
                                    for k in ks if n.has(k))


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


def reshape(n: Node) -> Value | Shape:
    """A shape reshaped to 1-D (``[-1]`` or its length) or, with one entry, to 0-D."""
    dims, scalar = dims_of(n, 0)
    target = [int(v) for v in n.array(1, "the shape").reshape(-1)]
    if target in ([-1], [len(dims)]):
        return result(n, dims)
    if not target and len(dims) == 1:
        return result(n, dims, scalar=True)
    raise PolyloopError(f"a shape of {len(dims)} entries reshaped to {target}")


def _operands(n: Node) -> tuple[list, list, bool]:
    """Inputs 0 and 1 as equally long lists of sympy expressions (a 0-d or 1-element operand
    broadcast), and whether the result is 0-d."""
    (a, sa), (b, sb) = dims_of(n, 0), dims_of(n, 1)
    if len(a) != len(b):
        if len(a) == 1:
            a = a * len(b)
        elif len(b) == 1:
            b = b * len(a)
        else:
            raise PolyloopError(f"shapes of {len(a)} and {len(b)} entries do not broadcast")
    return ([n.sizes.expression(d) for d in a], [n.sizes.expression(d) for d in b], sa and sb)


def arithmetic(n: Node) -> Value | Shape:
    """Add, Sub, Mul, Div (exact) of shapes: each entry a sum of products of the sizes,
    a derived size where it is not a constant or one named size."""
    import sympy
    a, b, scalar = _operands(n)
    out: list[Dim] = []
    for x, y in zip(a, b):
        if n.op_type == "Div":
            if y == 0:
                raise PolyloopError("a shape divided by 0")
            q = sympy.cancel(x / y)
            if sympy.fraction(q)[1] != 1:
                raise PolyloopError(f"{x} / {y} is not a whole number for every size; "
                                    "polyloop follows sums and products of sizes only")
            e = q
        else:
            e = {"Add": x + y, "Sub": x - y, "Mul": x * y}[n.op_type]
        out.append(as_dim(n.sizes, sympy.expand(e), f"{n.op_type} of shapes"))
    return result(n, tuple(out), scalar)


COMPARISONS = {"Equal": "is_zero", "Greater": "is_positive", "Less": "is_negative",
               "GreaterOrEqual": "is_nonnegative", "LessOrEqual": "is_nonpositive"}


def compare(n: Node) -> Value:
    """A comparison of shapes decided for every value of the sizes (each at least 1), a bool
    constant; a comparison that depends on the sizes' values is refused."""
    a, b, scalar = _operands(n)
    out = []
    for x, y in zip(a, b):
        decided = getattr(x - y, COMPARISONS[n.op_type])
        if decided is None:
            raise PolyloopError(f"whether {x} {n.op_type} {y} depends on the sizes' values; "
                                "polyloop compiles one program for every size")
        out.append(bool(decided))
    data = np.array(out, bool)
    return n.const(data.reshape(()) if scalar else data)


def where(n: Node) -> Value | Shape:
    """A known condition selecting between shapes, entry by entry."""
    cond = n.array(0, "the condition").reshape(-1)
    (a, sa), (b, sb) = dims_of(n, 1), dims_of(n, 2)
    size = max(len(cond), len(a), len(b))
    if any(len(v) not in (1, size) for v in (cond, a, b)):
        raise PolyloopError(f"Where of {len(cond)}, {len(a)} and {len(b)} entries does not "
                            "broadcast")

    def pick(v, k: int):
        return v[0] if len(v) == 1 else v[k]
    out = tuple(pick(a, k) if bool(pick(cond, k)) else pick(b, k) for k in range(size))
    return result(n, out, scalar=sa and sb and n.array(0).ndim == 0)


def _one(n: Node, k: int, what: str):
    dims, _ = dims_of(n, k)
    if len(dims) != 1:
        raise PolyloopError(f"{what} has {len(dims)} entries, not one")
    return n.sizes.expression(dims[0])


def range_(n: Node) -> Value:
    """Range up to a size (the positions of a sequence): ``start + delta * k`` over a length
    that is a size parameter."""
    import sympy
    start, limit, delta = (_one(n, k, what) for k, what in
                           ((0, "start"), (1, "limit"), (2, "delta")))
    if not (start.is_Integer and delta.is_Integer) or delta == 0:
        raise PolyloopError("a Range up to a size needs a constant start and a constant, "
                            "non-zero delta")
    count = sympy.cancel((limit - start) / delta)
    if sympy.fraction(count)[1] != 1:
        raise PolyloopError(f"a Range of ({limit} - {start}) / {delta} elements: not a whole "
                            "number for every size")
    length = as_dim(n.sizes, sympy.expand(count), "the length of a Range")
    e = n.entry(0)
    dtype = e.type.dtype if isinstance(e, Value) else "int64"
    return n.b.arange(length, dtype, int(start), int(delta), name=n.hint)


# an end at or past this is "to the end of the axis" (exporters write INT32_MAX or INT64_MAX)
_TO_THE_END = 2 ** 31 - 1


def symbolic_slice(n: Node, x: Value, axis: int, start: Dim, end: Dim, step: int) -> Value:
    """``x[start:end]`` along ``axis`` where the axis or a bound is a size: a gather at
    ``start + arange(length)``. A size as the end of a constant axis is bounded by it
    (``seq <= 512`` for the first ``seq`` rows of a table of 512), a constant end of a
    symbolic axis bounds the axis from below (the first 3 of ``seq`` need ``seq >= 3``);
    the executor checks the ranges when the model is called."""
    import sympy
    if step != 1:
        raise PolyloopError(f"a slice with step {step} and a symbolic axis or bound")
    size = n.sizes.expression(x.type.shape[axis])

    def bound(v: Dim):
        if isinstance(v, int) and v >= _TO_THE_END:
            return size
        e = n.sizes.expression(v)
        return size + e if isinstance(v, int) and v < 0 else e
    first, last = bound(start), bound(end)
    if not first.is_Integer or first < 0:
        raise PolyloopError(f"a slice from {start} of an axis of {x.type.shape[axis]}: the "
                            "start must be a constant position")
    if isinstance(end, int) and 0 <= end < _TO_THE_END and not size.is_Integer:
        n.sizes.bound(x.type.shape[axis], low=end)      # the first ``end`` of a size
        end_dim: Dim = end
    else:
        end_dim = as_dim(n.sizes, sympy.Min(last, size), f"the end of a slice of axis {axis}")
    length = as_dim(n.sizes, sympy.expand(n.sizes.expression(end_dim) - first),
                    f"the length of a slice of axis {axis}")
    if int(first) == 0 and length == x.type.shape[axis]:
        return x
    idx = n.b.arange(length, "int64", int(first), 1, name=n.hint)
    return n.emit(Op.GATHER, x, idx, axis=axis)
