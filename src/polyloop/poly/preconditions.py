# SPDX-License-Identifier: Apache-2.0
"""The sizes a program can run at: every access inside its buffer, every assumption true.

A program written for the sizes it is called with may still index out of bounds at sizes
nobody calls it with: PolyBench's ``correlation`` writes ``corr[m - 1][m - 1]`` after its
loops, which is outside ``corr`` when ``m = 0``. Rather than refuse such a program, polyloop
computes with isl the exact set of size parameters at which no access leaves its buffer, builds
the kernel for that set and checks it on every call. Each access that can leave its buffer
excludes the sizes at which some instance does (a union of convex pieces); each piece becomes
one requirement, written as the negation of the piece (``m >= 1``, ``nx >= 1 or ny == 0``),
that names the access it protects.

A program is refused only when no size is left, or when a statement would leave its buffer at
every size at which it runs (``A[i + 1]`` for ``i < n``): that is a mistake in the program,
not a precondition.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from ..ir.assumption import Assumption, any_of
from ..ir.expr import Expr
from ..ir.program import Program
from .bounds import OutOfBounds, access_cases, example, size_context
from .isl_ast import ast_expr


@dataclass(frozen=True, slots=True)
class Preconditions:
    """What a program needs of its sizes beyond being non-negative and its own assumptions.

    ``requirements``: one condition per excluded piece, whose ``reason`` names the access;
    ``sizes``: the isl set of every allowed size (assumptions included), "" when nothing is
    excluded; ``refusal``: why no useful size is left (then the others are empty)."""

    requirements: tuple[Assumption, ...] = ()
    sizes: str = ""
    refusal: str | None = None


def preconditions(program: Program) -> Preconditions:
    """The requirements on the sizes under which every affine access of ``program`` stays in
    its buffer (reads with indices or conditions on data are checked when the kernel runs).

    >>> import polyloop as pl
    >>> @pl.script
    ... def last(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("m",), "float64"]):
    ...     B[0] = A[n - 1]
    >>> [f"{r}: {r.reason}" for r in preconditions(last).requirements]
    ["m >= 1: 'B' writes B[0] out of bounds", "n >= 1: 'B' reads A[n - 1] out of bounds"]
    """
    ctx = size_context(program)
    cases = [c for c in access_cases(program, ctx) if not c.bad.is_empty()]
    if not cases:
        return Preconditions()
    excluded = cases[0].bad.params()
    for c in cases[1:]:
        excluded = excluded.union(c.bad.params())
    good = ctx.subtract(excluded).coalesce()
    refusal = _refusal(program, ctx, good, cases)
    if refusal is not None:
        return Preconditions(refusal=refusal)
    pieces: list[tuple[isl.BasicSet, str]] = []
    covered = None
    for c in cases:
        for piece in c.bad.params().coalesce().get_basic_sets():
            if covered is not None and piece.to_set().is_subset(covered):
                continue
            covered = piece.to_set() if covered is None else covered.union(piece)
            pieces.append((piece, c.describe()))
    requirements = tuple(Assumption(_negation(ctx, piece), reason=why) for piece, why in pieces)
    return Preconditions(requirements, str(good))


def with_preconditions(program: Program, pre: Preconditions) -> Program:
    """``program`` whose assumptions are the allowed sizes (what lowering may rely on)."""
    if not pre.sizes:
        return program
    return replace(program, assumptions=pre.sizes, _by_name={})


def _refusal(program: Program, ctx: isl.Set, good: isl.Set, cases) -> str | None:
    """Why the program cannot be built: no size is left, or a statement leaves its buffer at
    every size where it runs; None when it can."""
    fix = ("keep indices inside the tensor's shape, or guard the read with "
           "pl.where(condition, read, other)")
    if good.is_empty():
        return (f"{example(program, cases[0])}, and no size keeps every access of "
                f"'{program.name}' inside its buffer; {fix}")
    for c in cases:
        runs = c.instances.params().intersect(ctx)
        if not runs.is_empty() and c.instances.intersect_params(good).is_empty():
            return (f"{example(program, c)}, and it does at every size at which "
                    f"'{c.statement}' runs; {fix}")
    return None


def _negation(ctx: isl.Set, piece: isl.BasicSet) -> Expr:
    """A condition true exactly on ``ctx`` minus ``piece``: the negated constraints of the
    piece joined by ``or`` where isl allows it, else isl's own expression of the set."""
    rest = ctx.subtract(piece.to_set())
    build = isl.AstBuild.from_context(ctx)
    options = []
    union = None
    for part in _negated_constraints(piece.gist(ctx.simple_hull())):
        part = part.intersect(ctx)
        if part.is_empty():
            continue
        options.append(ast_expr(build.expr_from_set(part), {}, strict_bounds=True))
        union = part if union is None else union.union(part)
    if options and union is not None and union.is_equal(rest):
        return any_of(options)
    return ast_expr(build.expr_from_set(rest), {}, strict_bounds=True)


def _negated_constraints(piece: isl.BasicSet) -> list[isl.Set]:
    """The sets where one constraint of ``piece`` fails (an equality fails on two sides); []
    when the piece has local variables (a modulo), whose negation is no such list."""
    if piece.dim(isl.dim_type.div):
        return []
    out = []
    for c in piece.get_constraints():
        aff = c.get_aff()
        zero = isl.Aff.zero_on_domain(isl.LocalSpace.from_space(aff.get_domain_space()))
        out.append(aff.lt_set(zero))
        if c.is_equality():
            out.append(aff.gt_set(zero))
    return out


__all__ = ["OutOfBounds", "Preconditions", "preconditions", "with_preconditions"]
