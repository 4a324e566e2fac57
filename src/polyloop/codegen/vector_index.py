# SPDX-License-Identifier: Apache-2.0
"""Index analysis for vector loops: which accesses are invariant or contiguous in the loop
variable, and how a condition on indices changes from lane to lane.

>>> from polyloop.ir.expr import Var
>>> j, i = Var("j"), Var("i")
>>> index_stride((i * 64 + j,), "j"), index_stride((i,), "j"), index_stride((j * 2,), "j")
(1, 0, None)
"""
from __future__ import annotations

from ..ir.expr import (BinOp, BinOpKind, Const, Expr, Load, Unary, UnaryKind, Var, VarKind,
                       binop, walk)
from .flatten import Wrap, flat_offset, var_coefficient, wrap_of

MAX_LANE_STEP = 1 << 16        # |step| of an index condition: lane offsets stay small
Affine = dict[tuple[str, VarKind] | None, int]   # variable -> coefficient; None -> constant


def mentions(e: Expr, var: str) -> bool:
    """Whether loop variable ``var`` occurs in ``e`` (a size parameter of that name does not)."""
    return any(isinstance(n, Var) and n.name == var and n.kind is VarKind.ITER for n in walk(e))


def affine(e: Expr) -> Affine | None:
    """``e`` as integer coefficients of its variables plus a constant; None if not affine."""
    if isinstance(e, Const) and e.dtype.is_int:
        return {None: int(e.value)}
    if isinstance(e, Var) and e.dtype.is_int:
        return {(e.name, e.kind): 1}
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        inner = affine(e.operand)
        return None if inner is None else scaled(inner, -1)
    if isinstance(e, BinOp) and e.op in (BinOpKind.ADD, BinOpKind.SUB):
        a, b = affine(e.lhs), affine(e.rhs)
        if a is None or b is None:
            return None
        return added(a, scaled(b, -1) if e.op is BinOpKind.SUB else b)
    if isinstance(e, BinOp) and e.op is BinOpKind.MUL:
        a, b = affine(e.lhs), affine(e.rhs)
        if a is None or b is None:
            return None
        if set(b) <= {None}:
            return scaled(a, b.get(None, 0))
        if set(a) <= {None}:
            return scaled(b, a.get(None, 0))
    return None


def scaled(a: Affine, k: int) -> Affine:
    return {key: c * k for key, c in a.items()}


def added(a: Affine, b: Affine) -> Affine:
    out = dict(a)
    for key, c in b.items():
        out[key] = out.get(key, 0) + c
    return out


def index_stride(indices: tuple[Expr, ...], var: str,
                 shape: tuple[Expr, ...] | None = None) -> int | None:
    """0 for an access invariant in ``var``, 1 for a contiguous one, None for anything else.
    With the buffer's ``shape``, the quotient and remainder of a fused index count as their
    linear offset (``codegen.flatten``)."""
    if not any(mentions(i, var) for i in indices):
        return 0
    if shape is not None and any(mentions(i, var) for i in indices[:-1]):
        flat = flat_offset(indices, shape)
        if flat is not None and not any(mentions(i, var) for i in indices[:flat[0]]):
            return index_stride((flat[1],), var)
    if any(mentions(i, var) for i in indices[:-1]):
        return None
    last = affine(indices[-1])
    if last is None:    # invariant quotients or remainders (a partial tile's offset)
        return 1 if var_coefficient(indices[-1], var) == 1 else None
    return 1 if last.get((var, VarKind.ITER), 0) == 1 else None


def lane_condition(e: Expr, var: str) -> int | None:
    """For a comparison of two integer index expressions affine in ``var``, the coefficient of
    ``var`` in ``lhs - rhs`` (the lane step of the difference); None for anything else."""
    if not (isinstance(e, BinOp) and e.op.is_comparison and e.lhs.dtype.is_int
            and e.rhs.dtype.is_int):
        return None
    lhs, rhs = affine(e.lhs), affine(e.rhs)
    if lhs is None or rhs is None:
        return None
    step = lhs.get((var, VarKind.ITER), 0) - rhs.get((var, VarKind.ITER), 0)
    return step if abs(step) <= MAX_LANE_STEP else None


def wrapped_condition(e: Expr, var: str) -> Wrap | None:
    """For a comparison of integer indices that depends on ``var`` through the quotient and
    remainder of a fused index (``(16 * p0 + p1) % 28 + rx >= 1``), its :class:`Wrap`."""
    if not (isinstance(e, BinOp) and e.op.is_comparison and e.lhs.dtype.is_int
            and e.rhs.dtype.is_int):
        return None
    return wrap_of(binop(BinOpKind.SUB, e.lhs, e.rhs), var)


def load_key(e: Load) -> tuple[str, tuple[str, ...]]:
    """Loads with equal keys read the same element."""
    return e.buffer, tuple(str(i) for i in e.indices)
