# SPDX-License-Identifier: Apache-2.0
"""Do a program's reads stay inside their buffers? A generated kernel trusts its indices, so a
read past the end is a wrong answer or a crash; this finds one before any code is generated.

A read under ``where(cond, ...)`` happens only where ``cond`` selects it; affine conditions are
taken into account exactly. Reads with non-affine indices, or under conditions on data, cannot
be decided here and are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..ir.expr import BinOp, BinOpKind, Expr, Load, Select, Unary, UnaryKind, children
from ..ir.program import Program, Statement
from .access import buffer_box, domain
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, point_values, set_

_COMPARE = {BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
            BinOpKind.EQ: "=", BinOpKind.NE: "!="}


@dataclass(frozen=True, slots=True)
class OutOfBounds:
    """One access that leaves its buffer, with a concrete instance (sizes and iterators)."""
    statement: str
    load: Load
    is_write: bool
    example: dict[str, int]     # size parameters and iterators of one offending instance
    element: tuple[int, ...]    # the element it reads

    def __str__(self) -> str:
        verb = "writes" if self.is_write else "reads"
        return (f"'{self.statement}' {verb} {self.load} out of bounds: with "
                + ", ".join(f"{k} = {v}" for k, v in self.example.items())
                + f" it {verb} {self.load.buffer}[{', '.join(map(str, self.element))}]")


@dataclass(frozen=True, slots=True)
class AccessCase:
    """One affine access of a statement: the instances at which it runs and those of them
    (each paired with the element it touches) that leave the buffer."""
    statement: str
    load: Load
    is_write: bool
    instances: isl.Set
    bad: isl.Set       # wrapped pairs: statement instance -> element outside the buffer

    def describe(self) -> str:
        verb = "writes" if self.is_write else "reads"
        return f"'{self.statement}' {verb} {self.load} out of bounds"


def access_cases(program: Program, context: isl.Set):
    """An ``AccessCase`` for every affine access of ``program`` that runs at a decidable set
    of instances, at the sizes of ``context`` (a parameter set)."""
    for s in program.statements:
        dom = domain(program, s).intersect_params(context.align_params(
            domain(program, s).get_space()))
        accesses = [(s.target, dom, True)]
        for e in (s.value, *s.indices):
            accesses.extend((ld, guard, False) for ld, guard in _guarded_loads(program, s, e, dom))
        for load, where, is_write in accesses:
            bad = _outside(program, s, load, where)
            if bad is not None:
                yield AccessCase(s.name, load, is_write, where, bad)


def size_context(program: Program) -> isl.Set:
    """The sizes the program may be called with: non-negative, and its own assumptions."""
    nonneg = " and ".join(f"{p} >= 0" for p in program.params) or "true"
    context = set_(f"{params_prefix(program.params)}{{ : {nonneg} }}")
    if not program.assumptions:
        return context
    assumed = set_(program.assumptions)
    return context.align_params(assumed.get_space()).intersect(
        assumed.align_params(context.get_space()))


def find_out_of_bounds(program: Program) -> OutOfBounds | None:
    """The first access of ``program`` that can leave its buffer for some sizes >= 0 that
    satisfy its assumptions, or None."""
    for case in access_cases(program, size_context(program)):
        if not case.bad.is_empty():
            return example(program, case)
    return None


def guarded_loads(program: Program, s: Statement):
    """(load, the instances of ``s`` at which it executes) for every load of ``s``; the
    instances are None where a condition on data decides."""
    dom = domain(program, s)
    for e in (s.value, *s.indices):
        yield from _guarded_loads(program, s, e, dom)


def _guarded_loads(program: Program, s: Statement, e: Expr, where: isl.Set | None):
    """(load, the instances at which it executes) for every load of e; None: not decidable."""
    if isinstance(e, Load):
        yield e, where
        for ix in e.indices:   # an index that reads data runs wherever its load runs
            yield from _guarded_loads(program, s, ix, where)
        return
    if isinstance(e, Select):
        yield from _guarded_loads(program, s, e.cond, where)
        cond = _condition(program, s, e.cond)
        for branch, part in ((e.true_value, cond), (e.false_value, None if cond is None
                                                     else domain(program, s).subtract(cond))):
            inner = None if where is None or part is None else where.intersect(part)
            yield from _guarded_loads(program, s, branch, inner)
        return
    for c in children(e):
        yield from _guarded_loads(program, s, c, where)


def _condition(program: Program, s: Statement, c: Expr) -> isl.Set | None:
    """The instances of s at which the affine condition c holds; None if c is not affine."""
    if isinstance(c, BinOp) and c.op in (BinOpKind.AND, BinOpKind.OR):
        a, b = _condition(program, s, c.lhs), _condition(program, s, c.rhs)
        if a is None or b is None:
            return None
        return a.intersect(b) if c.op is BinOpKind.AND else a.union(b)
    if isinstance(c, Unary) and c.op is UnaryKind.NOT:
        inner = _condition(program, s, c.operand)
        return None if inner is None else domain(program, s).subtract(inner)
    if isinstance(c, BinOp) and c.op in _COMPARE and c.lhs.dtype.is_int:
        try:
            text = f"{expr_to_isl(c.lhs)} {_COMPARE[c.op]} {expr_to_isl(c.rhs)}"
        except NotAffine:
            return None
        return set_(f"{params_prefix(program.params)}{{ {s.name}[{', '.join(s.iters)}] : "
                    f"{text} }}")
    return None


def _outside(program: Program, s: Statement, load: Load, where: isl.Set | None
             ) -> isl.Set | None:
    """The (instance, element) pairs of an access outside its buffer; None: not decidable."""
    if where is None or not program.has_buffer(load.buffer):
        return None
    try:
        idx = ", ".join(expr_to_isl(i) for i in load.indices)
    except NotAffine:
        return None
    rel = map_(f"{params_prefix(program.params)}{{ {s.name}[{', '.join(s.iters)}] -> "
               f"{load.buffer}[{idx}] }}").intersect_domain(where)
    return rel.subtract_range(buffer_box(program, load.buffer)).wrap()


def example(program: Program, case: AccessCase) -> OutOfBounds:
    """One instance of ``case`` that leaves the buffer, with its sizes and iterators."""
    s = program.statement(case.statement)
    point = case.bad.sample_point()
    n_params = case.bad.dim(isl.dim_type.param)
    values = point_values(point, len(s.iters) + len(case.load.indices))
    out = {case.bad.get_dim_name(isl.dim_type.param, k):
           point.get_coordinate_val(isl.dim_type.param, k).to_python() for k in range(n_params)}
    out.update(zip(s.iters, values))
    return OutOfBounds(s.name, case.load, case.is_write, out, values[len(s.iters):])
