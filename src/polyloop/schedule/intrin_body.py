# SPDX-License-Identifier: Apache-2.0
"""The statement-level half of the tensorize match, shared by ``tensorize.match`` (a loop nest
against an intrinsic's description) and ``implementation.check`` (a polyloop implementation
against the description): plain-axis operands, and bodies equal up to a renaming of buffers.

>>> import polyloop as pl
>>> x = pl.placeholder((8,), "float32", name="x")
>>> y = pl.compute((8,), lambda i: x[i] * 2.0, name="y")
>>> u = pl.placeholder((8,), "float32", name="u")
>>> v = pl.compute((8,), lambda i: u[i] * 2.0, name="v")
>>> s, t = y.to_program().statements[0], v.to_program().statements[0]
>>> match_body(s, t, "twice")
{'y': 'v', 'x': 'u'}
"""
from __future__ import annotations

from dataclasses import fields

from ..errors import ArgumentError, ScheduleError
from ..ir.expr import Expr, Load, Var, loads
from ..ir.program import Statement


def check_operands(s: Statement, what: str = "the description") -> None:
    """Every index of every access of ``s`` is a distinct axis; each buffer is accessed once."""
    seen = set()
    for ld in [s.target] + loads(s.value):
        names = [i.name for i in ld.indices if isinstance(i, Var)]
        if len(names) != len(ld.indices) or len(set(names)) != len(names):
            raise ArgumentError(f"TensorIntrin: every index of {what} must be a "
                                f"distinct axis; {ld} is not")
        if ld.buffer in seen:
            raise ArgumentError(f"TensorIntrin: buffer '{ld.buffer}' is accessed twice in "
                                f"{what}; each operand may appear once")
        seen.add(ld.buffer)


def match_body(desc: Statement, stmt: Statement, name: str) -> dict[str, str]:
    """description buffer -> actual buffer, if the bodies have the same structure."""
    rename: dict[str, str] = {}

    def fail(what: str) -> ScheduleError:
        return ScheduleError(f"tensorize: body operator differs: statement '{stmt.name}' "
                             f"computes {stmt.target} {op_text(stmt)} {stmt.value}, intrinsic "
                             f"'{name}' computes {desc.target} {op_text(desc)} {desc.value} ({what})")

    def bind(d: Load, a: Load) -> None:
        if d.dtype is not a.dtype:
            raise fail(f"{a.buffer} is {a.dtype}, {d.buffer} is {d.dtype}")
        if rename.setdefault(d.buffer, a.buffer) != a.buffer:
            raise fail(f"{d.buffer} stands for both {rename[d.buffer]} and {a.buffer}")

    def same(d: Expr, a: Expr) -> None:
        if type(d) is not type(a):
            raise fail(f"{a} is not like {d}")
        if isinstance(d, Load):
            bind(d, a)  # type: ignore[arg-type]
            return
        if isinstance(d, Var):
            raise fail(f"the body uses index {a}")
        for f in fields(d):  # type: ignore[arg-type]
            x, y = getattr(d, f.name), getattr(a, f.name)
            if isinstance(x, Expr):
                same(x, y)
            elif isinstance(x, tuple) and x and isinstance(x[0], Expr):
                for p, q in zip(x, y):
                    same(p, q)
            elif f.name != "weak" and x != y:
                raise fail(f"{a} is not like {d}")

    if desc.reduction != stmt.reduction:
        raise fail("one is a reduction update, the other is not")
    bind(desc.target, stmt.target)
    same(desc.value, stmt.value)
    if any(ld.buffer == stmt.buffer for ld in loads(stmt.value)):
        raise ScheduleError(f"tensorize: statement '{stmt.name}' reads the buffer it writes "
                            f"({stmt.buffer}); the operands of an intrinsic must not overlap")
    return rename


def op_text(s: Statement) -> str:
    return "=" if s.reduction is None else f"{s.reduction.value}="


