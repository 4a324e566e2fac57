# SPDX-License-Identifier: Apache-2.0
"""Regions of buffers and isl affine values turned back into polyloop expressions; used by the
rewriting primitives (cache_read/cache_write, rfactor, transform_layout)."""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import islpy as isl

from ..errors import ScheduleError
from ..ir.dtypes import INDEX
from ..ir.expr import BinOpKind, Const, Expr, Var, VarKind, binop
from ..ir.program import Program
from .access import accesses, buffer_box, footprint
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, set_, with_params


def aff_to_expr(aff: isl.Aff, names: Sequence[str]) -> Expr:
    """An integer-valued isl affine expression as a polyloop expression over ``names``."""
    den = aff.get_denominator_val().to_python()
    terms: list[Expr] = []

    def add(coef: object, atom: Expr) -> None:
        c = isl.Val(str(coef)) if not isinstance(coef, isl.Val) else coef
        k = c.mul(isl.Val(str(den))).to_python()
        if k:
            terms.append(atom if k == 1 else binop(BinOpKind.MUL, Const(k, INDEX, True), atom))
    for k in range(aff.dim(isl.dim_type.in_)):
        add(aff.get_coefficient_val(isl.dim_type.in_, k), Var(names[k]))
    for k in range(aff.dim(isl.dim_type.param)):
        add(aff.get_coefficient_val(isl.dim_type.param, k),
            Var(aff.get_dim_name(isl.dim_type.param, k), VarKind.PARAM))
    for k in range(aff.dim(isl.dim_type.div)):
        if aff.get_coefficient_val(isl.dim_type.div, k).is_zero():
            continue
        d = aff.get_div(k)
        inner = aff_to_expr(d.scale_val(d.get_denominator_val()), names)
        dd = d.get_denominator_val().to_python()
        atom = binop(BinOpKind.FLOORDIV, inner, Const(dd, INDEX, True)) if dd != 1 else inner
        add(aff.get_coefficient_val(isl.dim_type.div, k), atom)
    const = aff.get_constant_val().mul(isl.Val(str(den))).to_python()
    out: Expr = Const(0, INDEX, True)
    for t in terms:
        out = binop(BinOpKind.ADD, out, t)
    if const:
        out = binop(BinOpKind.ADD, out, Const(const, INDEX, True))
    if den != 1:
        out = binop(BinOpKind.FLOORDIV, out, Const(den, INDEX, True))
    return out


def pw_aff_to_expr(pa: isl.PwAff, names: Sequence[str], what: str, *,
                   upper_bound: bool = False) -> Expr:
    """A single-piece isl value as an expression; with ``upper_bound``, piecewise values become
    the maximum of their pieces (at least the true value everywhere, enough for a size)."""
    pieces = pa.get_pieces()
    affs = {str(a) for _, a in pieces}
    if len(affs) != 1 and upper_bound:
        out = aff_to_expr(pieces[0][1], names)
        for _, a in pieces[1:]:
            out = binop(BinOpKind.MAX, out, aff_to_expr(a, names))
        return out
    if len(affs) != 1:
        raise ScheduleError(f"{what} is piecewise ({pa}); polyloop needs a single affine form here")
    return aff_to_expr(pieces[0][1], names)


def loop_value_expr(program: Program, stmt: str, text: str) -> Expr:
    """The value of a loop expression ``{ S[i, ...] -> [(...)] }`` as an expression of S's
    iterators (remembered by value: each prefetch of one reader asks for its outer loops)."""
    s = program.statement(stmt)
    return _loop_value(with_params(program.params, text), with_params(program.params, s.domain),
                       s.iters, stmt)


@lru_cache(maxsize=4096)
def _loop_value(text: str, domain_text: str, iters: tuple[str, ...], stmt: str) -> Expr:
    m = map_(text).intersect_domain(set_(domain_text))
    pma = isl.PwMultiAff.from_map(m)
    return pw_aff_to_expr(pma.get_pw_aff(0), iters, f"the value of a loop of '{stmt}'")


def clear_caches() -> None:
    """Forget remembered loop values (for timing code generation from scratch)."""
    _loop_value.cache_clear()


def read_region(program: Program, stmts: Sequence[str], buffer: str, name: str,
                iters: Sequence[str], *, writes: bool = False) -> str:
    """The elements of ``buffer`` the statements read (or write) as a domain text
    ``name[iters] : ...``."""
    region = footprint(program, stmts, buffer, writes=writes)
    if region is None:
        raise ScheduleError(f"{', '.join(stmts)} do not {'write' if writes else 'read'} "
                            f"'{buffer}'")
    # An access under where(cond, ...) has instances where cond is false and it never runs;
    # the accesses that run stay inside the buffer (pl.build proves it), so the region is
    # clipped to the buffer: a copy never touches an element outside it.
    region = region.intersect(buffer_box(program, buffer))
    region = region.coalesce().set_tuple_name(name)
    for k, it in enumerate(iters):
        region = region.set_dim_name(isl.dim_type.set, k, it)
    return str(region)


def exposed_region(program: Program, stmts: Sequence[str], buffer: str,
                   schedule: dict[str, isl.Map], name: str, iters: Sequence[str]) -> str | None:
    """The elements of ``buffer`` the statements read before writing them themselves (in the
    order of ``schedule``): the values they need from outside, as a domain text
    ``name[iters] : ...``; None when they need none (a reduction that initializes first)."""
    acc = [a for a in accesses(program) if a.statement in stmts and a.buffer == buffer]
    writes = [a for a in acc if a.is_write]
    region = None
    for a in acc:
        if a.is_write:
            continue
        instances = a.relation.domain()
        exposed = instances
        if all(w.exact for w in writes):   # an over-approximated write proves nothing written
            for w in writes:
                pairs = a.relation.apply_range(w.relation.reverse())
                pairs = pairs.intersect(schedule[a.statement].lex_gt_map(schedule[w.statement]))
                exposed = exposed.subtract(pairs.domain())
        if exposed.is_empty():
            continue
        r = a.relation.intersect_domain(exposed).range()
        region = r if region is None else region.union(r)
    if region is None:
        return None
    region = region.intersect(buffer_box(program, buffer)).coalesce().set_tuple_name(name)
    for k, it in enumerate(iters):
        region = region.set_dim_name(isl.dim_type.set, k, it)
    return str(region)


def layout_extents(program: Program, buffer: str, new_indices: Sequence[Expr],
                   old_iters: Sequence[str]) -> list[Expr]:
    """The shape of ``buffer`` after ``old index -> new_indices``: one past the largest new
    index in each dimension; refused when the map is not one-to-one on the buffer."""
    try:
        outs = ", ".join(expr_to_isl(e) for e in new_indices)
    except NotAffine:
        raise ScheduleError("transform_layout: the index map must be quasi-affine (+, -, "
                            "* by constants, // and % by constants)") from None
    box = buffer_box(program, buffer)
    m = map_(f"{params_prefix(program.params)}{{ {buffer}[{', '.join(old_iters)}] -> "
             f"[{outs}] }}").intersect_domain(box)
    if not m.is_injective():
        raise ScheduleError(f"transform_layout: the index map sends two elements of '{buffer}' to "
                            "the same place; it must be one-to-one")
    img = m.range()
    exts = []
    for k in range(img.dim(isl.dim_type.set)):
        lo = img.dim_min(k)
        if not lo.is_cst() or any(a.get_constant_val().to_python() < 0
                                  for _, a in lo.get_pieces()):
            raise ScheduleError(f"transform_layout: new dimension {k} may be negative")
        # a dimension bounded by a constant whatever the sizes (``j % 64``) gets that constant
        # extent: a panel's stride stays 64 for a symbolic n, not max(64, n)
        var = isl.Aff.var_on_domain(isl.LocalSpace.from_space(img.get_space()), isl.dim_type.set, k)
        top = img.max_val(var)
        if top.is_int():
            exts.append(Const(top.to_python() + 1, INDEX, weak=True))
            continue
        exts.append(binop(BinOpKind.ADD, pw_aff_to_expr(img.dim_max(k), [], "an extent",
                                                        upper_bound=True), 1))
    return exts


def constant_extent(program: Program, stmt: str, text: str) -> tuple[int, int] | None:
    """(min, max) of a loop expression over the statement's domain when both are constants."""
    from .affine import value_range
    lo, hi = value_range(program, stmt, text)
    return None if lo is None or hi is None else (lo, hi)
