# SPDX-License-Identifier: Apache-2.0
"""Arithmetic on loop expressions (isl maps ``S[i, ...] -> [value]``) for the schedule primitives."""
from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import islpy as isl

from ..ir.program import Program
from .access import accesses, domain, footprint
from .isl_util import CTX, map_, map_in, out_dims, params_prefix, set_, with_params
from .loop_expr import LoopExpr


def _text(m: isl.Map) -> LoopExpr:
    return LoopExpr.of(m.coalesce())


def combine(program: Program, exprs: Sequence[LoopExpr], formula: str) -> LoopExpr:
    """Apply ``formula`` (e.g. ``"[a, b] -> [(b + 2*a)]"``) to the values of ``exprs``."""
    m = map_in(program.params, exprs[0])
    for e in exprs[1:]:
        m = m.flat_range_product(map_in(program.params, e))
    f = map_(params_prefix(program.params) + "{ " + formula + " }")
    return _text(m.apply_range(f))


def _apply(program: Program, exprs: Sequence[LoopExpr], formula: isl.Map) -> LoopExpr:
    """The values of ``exprs`` (one per input dimension of ``formula``) mapped by ``formula``."""
    m = map_in(program.params, exprs[0])
    for e in exprs[1:]:
        m = m.flat_range_product(map_in(program.params, e))
    return _text(m.apply_range(formula))


def _formula(count: int, build: Callable[..., isl.PwAff]) -> isl.Map:
    """``[x0, ..., x(count-1)] -> [build(x0, ...)]`` as a map, in the form isl's parser gives a
    formula written as text (divisions as existentials), so that results print the same."""
    space = isl.LocalSpace.from_space(isl.Space.set_alloc(CTX, 0, count))
    xs = [isl.PwAff.from_aff(isl.Aff.var_on_domain(space, isl.dim_type.set, k))
          for k in range(count)]
    return isl.Map.from_pw_aff(build(*xs)).detect_equalities()


def _int(value: int) -> isl.Val:
    return isl.Val.int_from_si(CTX, value)


# The formulas are remembered by their constants: a schedule asks for the same few many times.
@lru_cache(maxsize=1024)
def _split_formula(shift: int, inner: int, factor: int | None) -> isl.Map:
    def build(x: isl.PwAff) -> isl.PwAff:
        value = x.add_constant_val(_int(-shift)) if shift else x
        if inner > 1:
            value = value.scale_down_val(_int(inner)).floor()
        return value if factor is None else value.mod_val(_int(factor))
    return _formula(1, build)


@lru_cache(maxsize=1024)
def _flatten_formula(ranges: tuple[tuple[int | None, int | None], ...]) -> isl.Map:
    def build(*values: isl.PwAff) -> isl.PwAff:
        acc: isl.PwAff | None = None
        for value, (lo, hi) in zip(values, ranges):
            term = value.add_constant_val(_int(-lo)) if lo else value
            acc = term if acc is None else \
                acc.scale_val(_int(hi - lo + 1)).add(term)  # type: ignore[operator]
        assert acc is not None
        return acc
    return _formula(len(ranges), build)


@lru_cache(maxsize=256)
def _skew_formula(factor: int) -> isl.Map:
    return _formula(2, lambda a, b: b.add(a.scale_val(_int(factor))))


@lru_cache(maxsize=1)
def _negate_formula() -> isl.Map:
    return _formula(1, lambda x: x.neg())


@lru_cache(maxsize=256)
def _shift_formula(offset: int) -> isl.Map:
    return _formula(1, lambda x: x.add_constant_val(_int(offset)))


def split_part(program: Program, expr: LoopExpr, *, shift: int, inner: int,
               factor: int | None) -> LoopExpr:
    """One loop of a split: ``floor((x - shift) / inner) mod factor`` of the value ``x`` of
    ``expr`` (no ``mod`` for the outermost part, ``factor=None``)."""
    return _apply(program, [expr], _split_formula(shift, inner, factor))


def flatten(program: Program, exprs: Sequence[LoopExpr],
            ranges: Sequence[tuple[int | None, int | None]]) -> LoopExpr:
    """The fused loop of nested loops with values ``exprs`` and value ranges ``ranges``
    (lowest, highest; the inner ones constant): ``((a0 - lo0) * ext1 + (a1 - lo1)) * ...``."""
    return _apply(program, exprs, _flatten_formula(tuple(ranges)))


def skewed(program: Program, outer: LoopExpr, inner: LoopExpr, factor: int) -> LoopExpr:
    """The inner loop's value plus ``factor`` times the outer loop's."""
    return _apply(program, [outer, inner], _skew_formula(factor))


def negated(program: Program, expr: LoopExpr) -> LoopExpr:
    """Minus the value of ``expr`` (a reversed loop)."""
    return _apply(program, [expr], _negate_formula())


def shifted(program: Program, expr: LoopExpr, offset: int | str) -> LoopExpr:
    """The value of ``expr`` plus ``offset``: an integer or an affine expression of the size
    parameters typed by a user (``"K - 1"``; isl's ParseError when it is not one)."""
    if isinstance(offset, int):
        return _apply(program, [expr], _shift_formula(offset))
    return combine(program, [expr], f"[x] -> [(x + ({offset}))]")


def value_range(program: Program, stmt: str, expr: LoopExpr) -> tuple[int | None, int | None]:
    """Bounds on a loop expression over the statement's domain and all parameter values, when
    they are finite (e.g. ``k mod 4`` lies in [0, 3] whatever n is). Remembered by value: the
    primitives and the lowering ask about the same loops many times."""
    return _value_range(tuple(program.params), program.statement(stmt).domain, expr)


@lru_cache(maxsize=4096)
def _value_range(params: tuple[str, ...], domain_text: str, expr: LoopExpr
                 ) -> tuple[int | None, int | None]:
    img = map_in(params, expr).intersect_domain(set_(with_params(params, domain_text))).range()
    if img.is_empty():
        return None, None
    # the optimum over the integer points of the set, parameters included: what the minimum
    # of the parametric minimum (``dim_min``) would give, without computing that
    value = isl.Aff.var_on_domain(isl.LocalSpace.from_space(img.get_space()), isl.dim_type.set, 0)
    return _finite(img.min_val(value)), _finite(img.max_val(value))


def clear_caches() -> None:
    """Forget remembered value ranges and formulas (for timing code generation from scratch)."""
    _value_range.cache_clear()
    _prefix_map.cache_clear()
    for formula in (_split_formula, _flatten_formula, _skew_formula, _negate_formula,
                    _shift_formula):
        formula.cache_clear()


def _finite(v: isl.Val) -> int | None:
    if v.is_infty() or v.is_neginfty() or v.is_nan() or not v.is_int():
        return None
    return v.to_python()


def depends_only_on(program: Program, stmt: str, expr: LoopExpr, iters: Sequence[str]) -> bool:
    """Is the expression's value fixed once ``iters`` are fixed (over the statement's domain)?"""
    s = program.statement(stmt)
    keep = [k for k, it in enumerate(s.iters) if it in iters]
    m = map_in(program.params, expr).intersect_domain(domain(program, s))
    proj = map_(params_prefix(program.params) + "{ " + f"{s.name}[{', '.join(s.iters)}] -> "
                f"[{', '.join(s.iters[k] for k in keep)}]" + " }")
    return proj.reverse().apply_range(m).is_single_valued()


def defined_everywhere(program: Program, stmt: str, expr: LoopExpr) -> bool:
    """Does the loop expression give a value for every instance of the statement?"""
    dom = domain(program, program.statement(stmt))
    m = map_in(program.params, expr)
    return bool(dom.is_subset(m.domain().align_params(dom.get_space())))


def determined_by(program: Program, stmt: str, exprs: Sequence[LoopExpr | str],
                  value: LoopExpr | str) -> bool:
    """Is the value of loop expression ``value`` fixed once the values of ``exprs`` are (over
    the statement's domain)? (``i`` is, by ``floor(i/4)`` and ``i mod 4``.)"""
    s = program.statement(stmt)
    key = prefix_map(program, stmt, exprs)
    m = map_in(program.params, value).intersect_domain(domain(program, s))
    return key.reverse().apply_range(m.align_params(key.get_space())).is_single_valued()


def retarget(program: Program, expr: LoopExpr, old: str, new: str, arg_map: str) -> LoopExpr:
    """Express a loop expression of statement ``old`` for statement ``new``, through
    ``arg_map`` = ``{ new[...] -> old[...] }``."""
    return _text(map_in(program.params, arg_map).apply_range(map_in(program.params, expr)))


def placement(program: Program, relation: isl.UnionMap | isl.Map, stmt: str, *,
              first: bool) -> list[LoopExpr]:
    """For a relation ``stmt[...] -> [o0, ..., od]`` (candidate loop values), the lexicographically
    first (or last) candidate of each instance, one expression text per loop value."""
    m = relation if isinstance(relation, isl.Map) else isl.Map.from_union_map(relation)
    m = m.lexmin() if first else m.lexmax()
    dom = domain(program, program.statement(stmt))
    return [_text(total(out_dims(m, k), dom)) for k in range(m.dim(isl.dim_type.out))]


def total(expr: isl.Map, dom: isl.Set) -> isl.Map:
    """A loop expression known on the statement's domain ``dom``, as a function of the
    iterators everywhere. Every loop expression must be total: the AST build of a GPU launch
    relaxes a domain by the facts its context already holds (``i < n`` where the launch's
    guard says so), and a band whose expression is undefined on part of the relaxed domain
    is refused by isl ("band node is not allowed to drop statement instances"). Outside
    ``dom`` the value is never used, so any extension will do: the simplification of the
    expression given ``dom``, and where that still leaves it undefined, one of its pieces.

    >>> total(isl.Map("[n] -> { S[i] -> [i] : 0 <= i < n }"),
    ...       isl.Set("[n] -> { S[i] : 0 <= i < n }"))
    Map("[n] -> { S[i] -> [i] }")
    >>> total(isl.Map("[n] -> { S[i] -> [0] : i <= 0; S[i] -> [i - 1] : 0 < i < n }"),
    ...       isl.Set("[n] -> { S[i] : 0 <= i < n }")).domain().is_equal(
    ...       isl.Set("[n] -> { S[i] }"))
    True
    """
    m = expr.gist_domain(dom.align_params(expr.get_space())).coalesce()
    if not m.is_single_valued():    # the gist may leave several values outside ``dom``
        m = expr.coalesce()
    known = m.domain()
    missing = isl.Set.universe(known.get_space()).subtract(known)
    if missing.is_empty():
        return m
    pieces: list[isl.MultiAff] = []
    if not m.is_empty():
        m.as_pw_multi_aff().foreach_piece(lambda _, value: pieces.append(value))
    if not pieces:
        return expr
    filler = isl.Map.from_multi_aff(pieces[0]).intersect_domain(missing)
    return m.union(filler.align_params(m.get_space())).coalesce()


def prefix_map(program: Program, stmt: str, exprs: Sequence[LoopExpr]) -> isl.Map:
    """``stmt[...] -> [v0, ..., vd]``: the values of the given loop expressions, on the domain
    (remembered by value: a prefetch and the compaction of its copy ask for the same)."""
    assert exprs
    return _prefix_map(tuple(program.params), program.statement(stmt).domain, tuple(exprs))


@lru_cache(maxsize=4096)
def _prefix_map(params: tuple[str, ...], domain_text: str, exprs: tuple[LoopExpr, ...]
                ) -> isl.Map:
    m = None
    for e in exprs:
        piece = map_in(params, e)
        m = piece if m is None else m.flat_range_product(piece)
    assert m is not None
    return m.intersect_domain(set_(with_params(params, domain_text)))


def rectangular(program: Program, exprs: dict[str, Sequence[LoopExpr]]) -> bool:
    """Do the loops with these expressions (per statement, outermost first) run a rectangle
    of values, for every value of the sizes: is the set of value tuples the product of the
    values each loop takes? (``j < i`` is a triangle: no.)"""
    values = None
    for stmt, es in exprs.items():
        r = prefix_map(program, stmt, es).range()
        values = r if values is None else values.union(r.align_params(values.get_space()))
    assert values is not None
    values = values.coalesce()
    n = values.dim(isl.dim_type.set)
    box = None
    for d in range(n):
        one = values.project_out(isl.dim_type.set, d + 1, n - d - 1).project_out(
            isl.dim_type.set, 0, d)
        box = one if box is None else box.flat_product(one)
    assert box is not None
    return bool(values.is_equal(box.align_params(values.get_space())))


def fixed_by(program: Program, stmt: str, outer: Sequence[LoopExpr], expr: LoopExpr) -> bool:
    """Is the loop expression single-valued once the ``outer`` loop expressions are fixed (a
    loop of one iteration, which isl leaves out of the code)?"""
    value = map_in(program.params, expr).intersect_domain(domain(program, program.statement(stmt)))
    if not outer:
        return value.range().is_singleton()
    return prefix_map(program, stmt, outer).reverse().apply_range(value).is_single_valued()


def footprint_placement(program: Program, stmt: str, buffer: str,
                        others: dict[str, Sequence[LoopExpr]], *, stmt_writes: bool,
                        first: bool) -> tuple[list[LoopExpr], bool]:
    """Where to put ``stmt`` among the loops of ``others`` (statement -> its loop expressions).

    With ``stmt_writes`` (compute_at), each instance goes to the first loop iteration of the
    others that reads an element it writes; otherwise (reverse_compute_at) to the last loop
    iteration of the others that writes an element it reads. Returns the expressions and
    whether every instance of ``stmt`` found a place.
    """
    acc = accesses(program)
    mine = [a.relation for a in acc
            if a.statement == stmt and a.buffer == buffer and a.is_write == stmt_writes]
    rel = None
    for other, exprs in others.items():
        theirs = [a.relation for a in acc if a.statement == other and a.buffer == buffer
                  and a.is_write != stmt_writes]
        pre = prefix_map(program, other, exprs)
        for m in mine:
            for t in theirs:
                r = m.apply_range(t.reverse()).apply_range(pre)
                rel = r if rel is None else rel.union(r)
    dom = domain(program, program.statement(stmt))
    if rel is None or rel.is_empty():
        return [], False
    covered = dom.is_subset(rel.domain())
    return placement(program, rel.coalesce(), stmt, first=first), covered


def is_subset_image(program: Program, stmt: str, buffer: str, other: str) -> bool:
    """Does every element ``other`` reads from ``buffer`` lie in what ``stmt`` writes there?"""
    written = footprint(program, (stmt,), buffer, writes=True)
    if written is None:
        return False
    read = footprint(program, (other,), buffer, writes=False)
    return read is None or read.is_subset(written)


def writes_within_reads(program: Program, writer: str, reader: str, buffer: str) -> bool:
    """Does ``reader`` read every element of ``buffer`` that ``writer`` writes?"""
    written = footprint(program, (writer,), buffer, writes=True)
    read = footprint(program, (reader,), buffer, writes=False)
    return written is not None and read is not None and written.is_subset(read)


def block_parts(program: Program, exprs: Sequence[tuple[str, LoopExpr]], parts: int
                ) -> tuple[list[LoopExpr], list[LoopExpr]] | None:
    """Split the values ``x`` of a loop (``exprs``: one per statement) into ``parts`` blocks of
    ``c = ceil(extent / parts)`` consecutive values, as TVM's ``split(nparts=...)``: the block
    number ``p`` and the offset ``x - lo - p*c`` in it, for each statement. ``p*c`` is a
    product of a loop index and a size, which no affine map holds; but ``p`` takes only
    ``parts`` constant values, so each is one piece ``j*c <= x - lo < (j+1)*c`` of a
    piecewise quasi-affine map (``c`` a floor of the sizes). None when the loop has no
    lowest or highest value isl can name."""
    values = None
    for stmt, e in exprs:
        img = map_in(program.params, e).intersect_domain(
            set_(with_params(tuple(program.params), program.statement(stmt).domain))).range()
        values = img if values is None else values.union(img.align_params(values.get_space()))
    if values is None or values.is_empty():
        return None
    values = values.coalesce()
    lo, hi = values.dim_min(0), values.dim_max(0)
    formula_p, formula_q = _block_formulas(values.get_space(), lo, hi, parts)
    outer = [LoopExpr.of(map_in(program.params, e).apply_range(
        formula_p.align_params(map_in(program.params, e).get_space()))) for _, e in exprs]
    inner = [LoopExpr.of(map_in(program.params, e).apply_range(
        formula_q.align_params(map_in(program.params, e).get_space()))) for _, e in exprs]
    return outer, inner


def _block_formulas(space: isl.Space, lo: isl.PwAff, hi: isl.PwAff, parts: int
                    ) -> tuple[isl.Map, isl.Map]:
    """``[x] -> [p]`` and ``[x] -> [x - lo - p*c]`` with ``c = floor((hi - lo + parts) /
    parts)``, one piece per block ``p``."""
    ls = isl.LocalSpace.from_space(space)
    x = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, 0))
    zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))

    def on_x(pa: isl.PwAff) -> isl.PwAff:     # a function of the sizes, on the space of x
        return zero.add(pa.align_params(space).insert_dims(isl.dim_type.in_, 0, 1))
    rel = x.sub(on_x(lo))
    size = on_x(hi).sub(on_x(lo)).add_constant_val(_int(parts)).scale_down_val(_int(parts))
    size = size.floor()
    p = q = None
    for j in range(parts):
        start, end = size.scale_val(_int(j)), size.scale_val(_int(j + 1))
        piece = rel.ge_set(start).intersect(rel.lt_set(end))
        pj = zero.add_constant_val(_int(j)).intersect_domain(piece)
        qj = rel.sub(start).intersect_domain(piece)
        p = pj if p is None else p.union_add(pj)
        q = qj if q is None else q.union_add(qj)
    assert p is not None and q is not None
    return isl.Map.from_pw_aff(p), isl.Map.from_pw_aff(q)
