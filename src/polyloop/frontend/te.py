# SPDX-License-Identifier: Apache-2.0
"""Tensor expressions: describe *what* to compute; ``to_program`` turns them into a Program.

>>> import polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n,), "float32", name="A")
>>> B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
>>> print(pl.to_program(B).statements[0].domain)
[n] -> { B[i] : 0 <= i < n }
"""
from __future__ import annotations

import contextvars
import inspect
import itertools
from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import PolyloopError
from ..ir.dtypes import DType, as_dtype
from ..ir.expr import (Const, Expr, ExprLike, Load, Reduce, Var, VarKind, as_expr, const,
                       free_vars, loads, reduce_identity, walk)
from ..ir.program import Buffer, BufferRole, Program, Statement
from ..poly.isl_util import isl_name, params_prefix
from .te_axes import ReduceAxis, _bounds, _shape, _tensor_name, reduce_axis, var
from .te_reducer import max, min, sum  # noqa: A004 - te.sum etc. are the public reductions
from .te_tuple import (TupleGroup, TupleReduce, check_iters, group_positions, group_statements,
                       resolve)

__all__ = ["Piece", "ReduceAxis", "Tensor", "compute", "max", "min", "placeholder",
           "reduce_axis", "sum", "to_program", "var"]

_counter = itertools.count()


@dataclass(eq=False)
class Tensor:
    """A placeholder or a computed tensor. Index it to read: ``A[i, j]``.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, 3), "float32", name="A")
    >>> B = pl.compute((n, 3), lambda i, j: A[i, j] * 2.0, name="B")
    >>> A, A.ndim, A.is_placeholder, B.is_placeholder
    (Tensor(A: float32[n, 3]), 2, True, False)
    >>> str(B.body), str(A[0, 1])
    ('A[i, j] * 2.0', 'A[0, 1]')
    """
    name: str
    shape: tuple[Expr, ...]
    dtype: DType
    order: int
    body: Expr | None = None            # None for placeholders
    iters: tuple[str, ...] = ()
    inputs: tuple["Tensor", ...] = ()
    # a tensor defined piecewise along its first axis (pl.scan: init rows, then the update)
    pieces: tuple["Piece", ...] = ()
    # one output of a reduction over tuples (argmax): the statements of all its outputs
    group: TupleGroup | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        return self.body is None

    def __getitem__(self, indices: object) -> Load:
        idx = indices if isinstance(indices, tuple) else (indices,)
        if len(idx) != self.ndim:
            raise PolyloopError(f"tensor '{self.name}' has {self.ndim} dimensions, indexed with "
                                f"{len(idx)}")
        exprs = tuple(as_expr(i) for i in idx)  # type: ignore[arg-type]
        for k, e in enumerate(exprs):
            if not e.dtype.is_int:
                raise PolyloopError(f"index {k} of '{self.name}' is {e.dtype} ({e}); indices "
                                    "must be integers")
            ext = self.shape[k]
            if isinstance(e, Const) and isinstance(ext, Const) and not 0 <= e.value < ext.value:
                raise PolyloopError(f"constant index {e.value} is out of range for dimension {k} "
                                    f"of '{self.name}' (extent {ext.value})")
        collector = _reads.get()
        if collector is not None:
            collector.append(self)
        return Load(self.name, exprs, self.dtype)

    def __repr__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape)
        return f"Tensor({self.name}: {self.dtype}[{shape}])"

    def to_program(self, *others: "Tensor", args: Sequence["Tensor"] | None = None,
                   name: str | None = None) -> Program:
        """The Program computing this tensor (and ``others``); what ``pl.Schedule(t)`` uses.

        >>> import polyloop as pl
        >>> n = pl.var("n")
        >>> A = pl.placeholder((n, 3), "float32", name="A")
        >>> k = pl.reduce_axis((0, 3), name="k")
        >>> S = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S")
        >>> prog = S.to_program(name="rowsum")
        >>> prog.args, prog.params
        (('A', 'S'), ('n',))
        >>> print(prog)
        # program rowsum  (params: n)
        # input  A: float32[n, 3]
        # output S: float32[n]
        S_init: [n] -> { S_init[i] : 0 <= i < n }
            S[i] = 0.0
        S: [n] -> { S[i, k] : 0 <= i < n and 0 <= k < 3 }
            S[i] += A[i, k]
        """
        return to_program(self, *others, args=args, name=name)


@dataclass(frozen=True, slots=True)
class Piece:
    """The rows ``start <= iters[0] < stop`` of a piecewise tensor, computed by ``body``."""
    body: Expr
    iters: tuple[str, ...]
    start: Expr
    stop: Expr


_reads: contextvars.ContextVar[list[Tensor] | None] = contextvars.ContextVar("reads", default=None)


def placeholder(shape: object, dtype: object = "float32", name: str | None = None) -> Tensor:
    """An input tensor: ``A = pl.placeholder((n, n), "float32", name="A")``.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, 4), "float64", name="A")
    >>> A, A.shape
    (Tensor(A: float64[n, 4]), (<Var n>, <Const 4>))
    """
    return Tensor(_tensor_name(name, "placeholder"), _shape(shape), as_dtype(dtype),
                  next(_counter))


def compute(shape: object, fcompute: Callable[..., ExprLike], name: str | None = None
            ) -> Tensor:
    """A tensor defined elementwise: ``pl.compute((n,), lambda i: A[i] + 1.0, name="B")``.

    The body may be a reduction (``pl.sum``, ``pl.max``, ``pl.min``) at its top level. A body
    that is a tuple gives a tuple of tensors of this shape, named ``B``, ``B_1``, ...:
    ``lo, hi = pl.compute((n,), lambda i: (A[i] - 1.0, A[i] + 1.0), name="B")``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((5,), "float32", name="A")
    >>> B = pl.compute((5,), lambda i: A[i] + 1.0, name="B")
    >>> B, str(B.body)
    (Tensor(B: float32[5]), 'A[i] + 1.0')
    >>> lo, hi = pl.compute((5,), lambda i: (A[i] - 1.0, A[i] + 1.0), name="C")
    >>> lo.name, hi.name, str(hi.body)
    ('C', 'C_1', 'A[i] + 1.0')
    """
    tensor_name = _tensor_name(name, "compute")
    dims = _shape(shape)
    names = _iter_names(fcompute, len(dims))
    iters = [Var(n) for n in names]
    collector: list[Tensor] = []
    token = _reads.set(collector)
    try:
        value = fcompute(*iters)
    finally:
        _reads.reset(token)
    if isinstance(value, TupleReduce):
        return _group_tensors(tensor_name, dims, names, value, collector)  # type: ignore[return-value]
    if isinstance(value, (tuple, list)):
        if not value:
            raise PolyloopError(f"the compute function of '{tensor_name}' returned an empty tuple")
        outs = []
        for k, v in enumerate(value):
            body = as_expr(v)
            used = {ld.buffer for ld in loads(body)}   # each output lists only what it reads
            outs.append(_tensor(f"{tensor_name}_{k}" if k else tensor_name, dims, names, body,
                                [t for t in collector if t.name in used]))
        return tuple(outs)  # type: ignore[return-value]
    return _tensor(tensor_name, dims, names, as_expr(value), collector)  # type: ignore[arg-type]


def _tensor(tensor_name: str, dims: tuple[Expr, ...], names: list[str], body: Expr,
            collector: list[Tensor]) -> Tensor:
    _check_body(body, names)
    read = {t.name for t in collector}
    for ld in loads(body):
        if ld.buffer not in read:
            raise PolyloopError(
                f"the compute body reads '{ld.buffer}' through an expression built outside the "
                f"compute function ({ld}); index tensors inside the function passed to compute")
    if body.weak:  # a constant or index expression: give it a concrete type
        body = body.astype(body.dtype)
    inputs = tuple(dict.fromkeys(collector))
    return Tensor(tensor_name, dims, body.dtype, next(_counter), body, tuple(names), inputs)


def _group_tensors(tensor_name: str, dims: tuple[Expr, ...], names: list[str], r: TupleReduce,
                   collector: list[Tensor]) -> tuple[Tensor, ...] | Tensor:
    outputs = [f"{tensor_name}_{k}" if k else tensor_name for k in range(len(r.sources))]
    group = resolve(r, outputs, names)
    check_iters(group, r.sources, names)
    read = {t.name for t in collector}
    for src in r.sources:
        for ld in loads(src):
            if ld.buffer not in read:
                raise PolyloopError(f"reducer '{r.label}' reads '{ld.buffer}' through an "
                                    f"expression built outside the compute function ({ld}); "
                                    "index tensors inside the function passed to compute")
    inputs = tuple(dict.fromkeys(collector))
    out = tuple(Tensor(name, dims, d, next(_counter), body, tuple(names), inputs, group=group)
                for name, d, body in zip(outputs, group.dtypes, group.updates))
    for t in out:  # each update reads the other outputs' values: they are its inputs too
        t.inputs = inputs + tuple(u for u in out if u is not t)
    return out if len(out) > 1 else out[0]  # type: ignore[return-value]


def _iter_names(fcompute: Callable[..., object], n: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return [f"i{k}" for k in range(n)]
    if len(params) != n:
        raise PolyloopError(f"the compute function takes {len(params)} arguments but the shape "
                            f"has {n} dimensions")
    return [isl_name(p.name) for p in params]


def _check_body(body: Expr, iters: list[str]) -> None:
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise PolyloopError("a reduction (pl.sum/max/min) must be the outermost operation of "
                                f"a compute body; compute it as its own tensor first: {node}")
    axes: list[str] = []
    if isinstance(body, Reduce):
        axes = [ax.name for ax in body.axes]
        used = free_vars(body.source)
        for k, ax in enumerate(axes):
            if ax in iters:
                raise PolyloopError(f"reduce axis '{ax}' has the name of a spatial axis")
            if ax in axes[:k]:
                raise PolyloopError(f"reduce axis '{ax}' is listed twice in axis=; list each "
                                    "axis once")
            if ax not in used:
                raise PolyloopError(f"reducing over axis '{ax}', which the reduced "
                                    f"expression does not use: {body.source}")
    for v in walk(body):
        if isinstance(v, Var) and v.kind is VarKind.ITER and v.name not in iters + axes:
            raise PolyloopError(
                f"the compute body uses axis '{v.name}', which is neither one of its own axes "
                f"({', '.join(iters) or 'none'}) nor reduced over: {body}; reduce over a "
                f"reduce axis with pl.sum/max/min(..., axis={v.name})")


# lowering to a Program ------------------------------------------------------------------------

def _collect(outputs: Sequence[Tensor]) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    stack = list(outputs)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        stack.extend(t.inputs)
    return sorted(seen.values(), key=lambda t: t.order)


def to_program(*outputs: Tensor, args: Sequence[Tensor] | None = None,
               name: str | None = None) -> Program:
    """The Program computing ``outputs`` (default schedule: one loop nest per statement).

    Arguments are ``args`` in that order, or the placeholders in order of creation followed by
    the outputs. Other computed tensors become temporaries.

    >>> import polyloop as pl
    >>> n = pl.var("n")
    >>> A = pl.placeholder((n, 3), "float32", name="A")
    >>> k = pl.reduce_axis((0, 3), name="k")
    >>> S = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S")
    >>> prog = pl.to_program(S, name="rowsum")
    >>> prog.args, prog.params
    (('A', 'S'), ('n',))
    >>> print(prog)
    # program rowsum  (params: n)
    # input  A: float32[n, 3]
    # output S: float32[n]
    S_init: [n] -> { S_init[i] : 0 <= i < n }
        S[i] = 0.0
    S: [n] -> { S[i, k] : 0 <= i < n and 0 <= k < 3 }
        S[i] += A[i, k]
    """
    outs = [o for o in outputs]
    if not outs or not all(isinstance(o, Tensor) for o in outs):
        raise PolyloopError(f"expected output tensors, got {outputs!r}")
    if any(o.is_placeholder for o in outs):
        raise PolyloopError("an output must be computed by pl.compute, not a placeholder")
    _assert_unique(outs, "the outputs")
    tensors = _collect(outs)
    by_name: dict[str, Tensor] = {}
    for t in tensors:
        if t.name in by_name:
            raise PolyloopError(f"two different tensors are named '{t.name}'; give them unique "
                                "names")
        by_name[t.name] = t
    arg_list = _arguments(tensors, outs, args)
    arg_ids = {id(t) for t in arg_list}
    buffers = []
    for t in tensors:
        role = (BufferRole.INPUT if t.is_placeholder else
                BufferRole.OUTPUT if id(t) in arg_ids else BufferRole.TEMP)
        buffers.append(Buffer(t.name, t.shape, t.dtype, role))
    params = _params(arg_list, tensors)
    statements, nesting = _all_statements(tensors, params)
    return Program(name or outs[0].name, tuple(buffers), tuple(statements), tuple(params),
                   tuple(t.name for t in arg_list), nesting=nesting)


def _all_statements(tensors: list[Tensor], params: list[str]
                    ) -> tuple[list[Statement], tuple[tuple[str, tuple[int, ...]], ...]]:
    """The statements in program order, and their nesting when a tuple reduction shares loops
    between statements (otherwise none: one loop nest per statement)."""
    statements: list[Statement] = []
    nesting: list[tuple[str, tuple[int, ...]]] = []
    done: set[int] = set()
    top = 0
    for t in tensors:
        if t.is_placeholder or id(t.group) in done:
            continue
        if t.group is None:
            for s in _statements(t, params):
                statements.append(s)
                nesting.append((s.name, (top,) + (0,) * len(s.iters)))
                top += 1
            continue
        done.add(id(t.group))
        statements.extend(group_statements(t.group, t.iters, t.shape, params))
        pos, used = group_positions(t.group, top, len(t.iters))
        nesting.extend(pos)
        top += used
    return statements, tuple(nesting) if done else ()


def _assert_unique(tensors: Sequence[Tensor], what: str) -> None:
    seen: set[int] = set()
    for t in tensors:
        if id(t) in seen:
            raise PolyloopError(f"tensor '{t.name}' appears twice in {what}; list each tensor once")
        seen.add(id(t))


def _arguments(tensors: list[Tensor], outs: list[Tensor],
               args: Sequence[Tensor] | None) -> list[Tensor]:
    """The argument list: ``args`` checked, or the placeholders by creation, then the outputs."""
    if args is None:
        return [t for t in tensors if t.is_placeholder] + outs
    arg_list = list(args)
    for a in arg_list:
        if not isinstance(a, Tensor):
            raise PolyloopError(f"args= takes tensors (pl.placeholder / pl.compute), got "
                                f"{type(a).__name__} {a!r}")
    _assert_unique(arg_list, "args=")
    known = {id(t) for t in tensors}
    stray = [a.name for a in arg_list if id(a) not in known]
    if stray:
        raise PolyloopError(f"args= lists {stray}, which the outputs do not use; list only the "
                            "inputs and outputs (and any intermediate tensor to return)")
    listed = {id(a) for a in arg_list}
    missing = [t.name for t in tensors if (t.is_placeholder or t in outs) and id(t) not in listed]
    if missing:
        raise PolyloopError(f"args= must list every input and output; missing: {missing}")
    return arg_list


def _params(args: list[Tensor], tensors: list[Tensor]) -> list[str]:
    found: dict[str, None] = {}
    for t in args + tensors:
        for d in t.shape:
            for v in walk(d):
                if isinstance(v, Var) and v.kind is VarKind.PARAM:
                    found.setdefault(v.name)
        for body in [t.body] + [p.body for p in t.pieces]:
            if body is None:
                continue
            for v in walk(body):
                if isinstance(v, Var) and v.kind is VarKind.PARAM:
                    found.setdefault(v.name)
    return list(found)


def _piece_statements(t: Tensor, params: list[str]) -> list[Statement]:
    """One statement per piece of a piecewise tensor, over its rows of the first axis."""
    pre = params_prefix(params)
    out = []
    for k, p in enumerate(t.pieces):
        # the piece's rows, clipped to the tensor (init rows of a scan shorter than them)
        rows = _bounds(p.iters[:1], [p.start], [p.stop - p.start], t.name) + \
            _bounds(p.iters[:1], [const(0)], t.shape[:1], t.name)
        rest = _bounds(p.iters[1:], [const(0)] * (len(p.iters) - 1), t.shape[1:], t.name)
        name = t.name if k == len(t.pieces) - 1 else f"{t.name}_init"
        dom = f"{pre}{{ {name}[{', '.join(p.iters)}] : {' and '.join(rows + rest)} }}"
        out.append(Statement(name, p.iters, dom, t.name, tuple(Var(i) for i in p.iters), p.body,
                             block=name))
    return out


def _statements(t: Tensor, params: list[str]) -> list[Statement]:
    assert t.body is not None
    if t.pieces:
        return _piece_statements(t, params)
    pre = params_prefix(params)
    axis_names = t.iters + (tuple(a.name for a in t.body.axes)
                            if isinstance(t.body, Reduce) else ())
    for it in axis_names:
        if it in params:
            raise PolyloopError(f"axis '{it}' of '{t.name}' has the name of a size parameter; "
                                "rename the axis")
    zero = [const(0)] * len(t.iters)
    spatial = _bounds(t.iters, zero, t.shape, t.name)
    idx = tuple(Var(i) for i in t.iters)
    body = t.body
    if not isinstance(body, Reduce):
        dom = f"{pre}{{ {t.name}[{', '.join(t.iters)}] : {' and '.join(spatial) or 'true'} }}"
        return [Statement(t.name, t.iters, dom, t.name, idx, body, block=t.name)]
    axes = tuple(a.name for a in body.axes)
    red = _bounds(axes, body.starts, body.extents, t.name)
    all_iters = t.iters + axes
    init_dom = f"{pre}{{ {t.name}_init[{', '.join(t.iters)}] : {' and '.join(spatial) or 'true'} }}"
    upd_dom = f"{pre}{{ {t.name}[{', '.join(all_iters)}] : {' and '.join(spatial + red)} }}"
    init = Statement(f"{t.name}_init", t.iters, init_dom, t.name, idx,
                     reduce_identity(body.kind, body.dtype), block=t.name, is_init=True)
    update = Statement(t.name, all_iters, upd_dom, t.name, idx, body.source, body.kind,
                       block=t.name)
    return [init, update]
