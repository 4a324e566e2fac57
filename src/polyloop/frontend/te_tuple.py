# SPDX-License-Identifier: Apache-2.0
"""Reductions over tuples of values (argmax, argmin), as TVM's ``te.comm_reducer`` with a
combining function that takes and returns tuples.

``reducer((k, A[i, k]), axis=k)`` inside ``pl.compute`` gives one tensor per component. The
reduction becomes what it is in the polyhedral model: one initialising statement and one update
statement per component, the updates sharing the reduction loops, each reading the components'
values before this step. Dependences between the updates are exact, so a schedule may split,
reorder or parallelize the spatial loops, and any reordering of the reduction loops (which
would change which index wins a tie) is refused. The reduction runs in the order of its axes,
so a combine that keeps the accumulated value on ties gives the first index, as NumPy does.

>>> import polyloop as pl
>>> A = pl.placeholder((4, 5), "float32", name="A")
>>> k = pl.reduce_axis((0, 5), name="k")
>>> idx, val = pl.compute((4,), lambda i: pl.argmax(A[i, k], axis=k), name="T")
>>> idx.dtype, val.dtype, str(idx.body)
(<DType.INT64: 'int64'>, <DType.FLOAT32: 'float32'>, 'where((A[i, k] > T_1[i]) | isnan(A[i, k]) & ~isnan(T_1[i]), k, T[i])')
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import PolyloopError
from ..ir.dtypes import DType, as_dtype
from ..ir.expr import Const, Expr, Load, Var, VarKind, as_expr, cast, const, loads, walk
from ..ir.program import Statement
from ..poly.isl_util import params_prefix
from .te_axes import ReduceAxis, _bounds


@dataclass(frozen=True, slots=True)
class TupleReduce:
    """``reducer((a, b), axis=k)`` before ``pl.compute`` names the outputs."""
    label: str
    combine: Callable[..., object]
    identity: Callable[..., object]
    sources: tuple[Expr, ...]
    axes: tuple[ReduceAxis, ...]


@dataclass(frozen=True, slots=True)
class TupleGroup:
    """The outputs of one tuple reduction: their names, dtypes, identities, updates (each an
    expression of the sources and of every output's value before the step), and the order the
    updates run in (each before any update that overwrites a value it reads)."""
    label: str
    outputs: tuple[str, ...]
    dtypes: tuple[DType, ...]
    inits: tuple[Expr, ...]
    updates: tuple[Expr, ...]
    order: tuple[int, ...]
    axes: tuple[ReduceAxis, ...]


def tuple_reduce(label: str, combine: Callable[..., object], identity: Callable[..., object],
                 values: Sequence[object], axis: object) -> TupleReduce:
    """The pending reduction of ``values`` over ``axis`` (checked; combined in ``resolve``)."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes or not all(isinstance(a, ReduceAxis) for a in axes):
        raise PolyloopError(f"reducer '{label}': axis= takes reduce axes made by "
                            f"pl.reduce_axis, got {axis!r}")
    if not values:
        raise PolyloopError(f"reducer '{label}' was given an empty tuple; give the values to "
                            "reduce, like (k, A[i, k])")
    sources = []
    for v in values:
        e = as_expr(v)  # type: ignore[arg-type]
        sources.append(e.astype(e.dtype) if e.weak else e)
    return TupleReduce(label, combine, identity, tuple(sources), axes)


def resolve(r: TupleReduce, outputs: Sequence[str], iters: Sequence[str]) -> TupleGroup:
    """Apply the combining function to the outputs' accumulators and the sources."""
    n = len(r.sources)
    dtypes = tuple(s.dtype for s in r.sources)
    index = tuple(Var(i) for i in iters)
    acc = tuple(Load(name, index, d) for name, d in zip(outputs, dtypes))
    combined = _tuple_of(r, r.combine, (acc, r.sources), "combine(x, y)", n)
    updates = tuple(cast(d, e) for d, e in zip(dtypes, combined))
    ident = _tuple_of(r, r.identity, dtypes, f"identity({', '.join(map(str, dtypes))})", n)
    for e in ident:
        if any(isinstance(x, (Load, Var)) for x in walk(e)):
            raise PolyloopError(f"reducer '{r.label}': the identity {e} is not a constant; "
                                "return constants such as pl.const(-1, dtype)")
    return TupleGroup(r.label, tuple(outputs), dtypes, tuple(cast(d, e) for d, e in
                                                               zip(dtypes, ident)),
                      updates, _update_order(r.label, outputs, updates), r.axes)


def _tuple_of(r: TupleReduce, fn: Callable[..., object], args: tuple, what: str,
              n: int) -> tuple[Expr, ...]:
    try:
        out = fn(*args)
    except PolyloopError as e:
        raise PolyloopError(f"reducer '{r.label}': {what} failed: {e}") from None
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise PolyloopError(f"reducer '{r.label}': {what} returned {out!r}; it must return a "
                            f"tuple of {n} values, one per reduced value")
    return tuple(as_expr(e) for e in out)  # type: ignore[arg-type]


def _update_order(label: str, outputs: Sequence[str], updates: Sequence[Expr]) -> tuple[int, ...]:
    """Updates in an order where none overwrites a value a later update reads."""
    reads = [{ld.buffer for ld in loads(u)} & set(outputs) for u in updates]
    pending, order = list(range(len(outputs))), []
    while pending:
        ready = [j for j in pending
                 if not any(outputs[j] in reads[m] for m in pending if m != j)]
        if not ready:
            names = ", ".join(outputs[j] for j in pending)
            raise PolyloopError(f"reducer '{label}': the updates of {names} each read another's "
                                "previous value, so no order of the updates is right; let one "
                                "component depend only on itself and the new values")
        order.append(ready[0])
        pending.remove(ready[0])
    return tuple(order)


def check_iters(group: TupleGroup, sources: Sequence[Expr], iters: Sequence[str]) -> None:
    """Every axis a source uses is a spatial axis or one of the reduced axes, and each reduced
    axis is used."""
    axes = [a.var.name for a in group.axes]
    used = {v.name for s in sources for v in walk(s) if isinstance(v, Var)}
    for k, ax in enumerate(axes):
        if ax in iters or ax in axes[:k]:
            raise PolyloopError(f"reducer '{group.label}': reduce axis '{ax}' is a spatial axis "
                                "or listed twice; list each reduce axis once")
        if ax not in used:
            raise PolyloopError(f"reducer '{group.label}' reduces over axis '{ax}', which the "
                                "reduced values do not use")
    for s in sources:
        for v in walk(s):
            if isinstance(v, Var) and v.kind is VarKind.ITER and v.name not in [*iters, *axes]:
                raise PolyloopError(f"reducer '{group.label}' uses axis '{v.name}', which is "
                                    f"neither a spatial axis ({', '.join(iters)}) nor reduced")


def group_statements(group: TupleGroup, iters: tuple[str, ...], shape: Sequence[Expr],
                     params: Sequence[str]) -> list[Statement]:
    """The initialising statements (``T_init``, ...) then the updates (``T``, ...), in order."""
    pre = params_prefix(list(params))
    owner = group.outputs[0]
    spatial = _bounds(iters, [const(0)] * len(iters), shape, owner)
    axes = tuple(a.var.name for a in group.axes)
    red = _bounds(axes, [a.start for a in group.axes], [a.extent for a in group.axes], owner)
    idx = tuple(Var(i) for i in iters)
    out = []
    for name, init in zip(group.outputs, group.inits):
        dom = f"{pre}{{ {name}_init[{', '.join(iters)}] : {' and '.join(spatial) or 'true'} }}"
        out.append(Statement(f"{name}_init", iters, dom, name, idx, init))
    for j in group.order:
        name = group.outputs[j]
        dom = f"{pre}{{ {name}[{', '.join(iters + axes)}] : {' and '.join(spatial + red)} }}"
        out.append(Statement(name, iters + axes, dom, name, idx, group.updates[j]))
    return out


def group_positions(group: TupleGroup, top: int, depth: int
                    ) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """Nesting positions from top-level place ``top``: a nest of the inits side by side, then
    a nest of the updates side by side (as a reduction's init and update nests), and how many
    top-level places the group takes."""
    n, r = len(group.outputs), len(group.axes)
    if depth == 0:  # no spatial loop to share: each init is a statement of its own
        pos = [(f"{name}_init", (top + k,)) for k, name in enumerate(group.outputs)]
        pos += [(group.outputs[j], (top + n,) + (0,) * (r - 1) + (k,))
                for k, j in enumerate(group.order)]
        return pos, n + 1
    pos = [(f"{name}_init", (top,) + (0,) * (depth - 1) + (k,))
           for k, name in enumerate(group.outputs)]
    pos += [(group.outputs[j], (top + 1,) + (0,) * (depth + r - 1) + (k,))
            for k, j in enumerate(group.order)]
    return pos, 2


# ready-made reducers ------------------------------------------------------------------------

def min_value(dtype: object) -> Const:
    """The lowest finite value of ``dtype`` (TVM's ``te.min_value``): ``pl.min_value("int32")``.

    >>> import polyloop as pl
    >>> pl.min_value("int8").value
    -128
    """
    d = as_dtype(dtype)
    info = np.finfo(d.numpy) if d.is_float else np.iinfo(d.numpy)
    return const(info.min.item() if d.is_float else int(info.min), d)


def max_value(dtype: object) -> Const:
    """The highest finite value of ``dtype`` (TVM's ``te.max_value``): ``pl.max_value("float32")``.

    >>> import polyloop as pl
    >>> pl.max_value("uint8").value
    255
    """
    d = as_dtype(dtype)
    info = np.finfo(d.numpy) if d.is_float else np.iinfo(d.numpy)
    return const(info.max.item() if d.is_float else int(info.max), d)
