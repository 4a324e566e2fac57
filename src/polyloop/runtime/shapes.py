# SPDX-License-Identifier: Apache-2.0
"""Integer arithmetic on buffer shapes: evaluate a dimension, or read it as ``a*n + b``.

A buffer dimension is a small expression over size parameters (``n``, ``n + 2``, ``2*n``,
``min(n, 8)``). The runtime evaluates dimensions to check and allocate arrays, and solves the
affine ones to infer a size parameter from an array's shape.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import PolyloopError
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Expr, Unary, UnaryKind, Var, VarKind
from ..ir.program import Buffer
from ..ir.shapes import evaluate  # re-exported: the runtime's callers evaluate shapes here

@dataclass(frozen=True, slots=True)
class Affine:
    """``sum(coeffs[p] * p) + constant`` over size parameters, with integer coefficients."""

    coeffs: tuple[tuple[str, int], ...]
    constant: int

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.coeffs)


def to_affine(e: Expr) -> Affine | None:
    """Read ``e`` as an affine form in size parameters, or None when it is not affine.

    >>> from polyloop.ir.program import param
    >>> to_affine(2 * param("n") - 1)
    Affine(coeffs=(('n', 2),), constant=-1)
    """
    terms = _linear(e)
    if terms is None:
        return None
    constant = terms.pop("", 0)
    return Affine(tuple(sorted((p, c) for p, c in terms.items() if c != 0)), constant)


def _linear(e: Expr) -> dict[str, int] | None:
    """Coefficients by parameter name; the constant term is under the key ``""``."""
    if isinstance(e, Const):
        ok = isinstance(e.value, int) and not isinstance(e.value, bool)
        return {"": e.value} if ok else None  # type: ignore[dict-item]
    if isinstance(e, Var):
        return {e.name: 1} if e.kind is VarKind.PARAM else None
    if isinstance(e, Cast) and e.dtype.is_int:
        return _linear(e.value)
    if isinstance(e, Unary) and e.op is UnaryKind.NEG:
        inner = _linear(e.operand)
        return None if inner is None else {k: -v for k, v in inner.items()}
    if not isinstance(e, BinOp) or e.op not in (BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL):
        return None
    lhs, rhs = _linear(e.lhs), _linear(e.rhs)
    if lhs is None or rhs is None:
        return None
    if e.op is BinOpKind.MUL:
        return _scale(lhs, rhs)
    sign = 1 if e.op is BinOpKind.ADD else -1
    out = dict(lhs)
    for k, v in rhs.items():
        out[k] = out.get(k, 0) + sign * v
    return out


def _scale(lhs: dict[str, int], rhs: dict[str, int]) -> dict[str, int] | None:
    """Product of two linear forms, when one of them is a constant."""
    if set(lhs) <= {""}:
        lhs, rhs = rhs, lhs
    if not set(rhs) <= {""}:
        return None
    factor = rhs.get("", 0)
    return {k: v * factor for k, v in lhs.items()}


def solve(form: Affine, size: int, env: Mapping[str, int]) -> tuple[str, int] | None:
    """Solve ``form == size`` for its one parameter not in ``env``.

    Returns (parameter, value), or None when the parameter's coefficient does not divide
    ``size`` minus the rest (no integer solution). The caller makes sure exactly one parameter
    of ``form`` is unbound.

    >>> from polyloop.ir.program import param
    >>> solve(to_affine(2 * param("n") + 2), 10, {})
    ('n', 4)
    """
    unknown = [(p, c) for p, c in form.coeffs if p not in env]
    if len(unknown) != 1:
        raise PolyloopError(f"solve() needs exactly one unbound parameter, got {unknown}")
    name, coeff = unknown[0]
    rest = size - form.constant - sum(c * env[p] for p, c in form.coeffs if p in env)
    if rest % coeff != 0:
        return None
    return name, rest // coeff


def shape_to_str(b: Buffer) -> str:
    """``float32[n, n + 2]``: the dtype and symbolic shape of a buffer."""
    return f"{b.dtype}[{', '.join(str(d) for d in b.shape)}]"

