# SPDX-License-Identifier: Apache-2.0
"""What a kernel (``pl.make_kernel``) knows of its sizes and arrays: the size parameters'
context with the user's assumptions, and the smallest shape of an array that holds every
element its accesses touch.

>>> context(["n"], "n mod 4 = 0").is_subset(context(["n"]))
True
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..errors import ParseError
from ..ir.expr import Expr
from .isl_text import ISL_NAME, ISL_WORDS
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, set_
from .regions import pw_aff_to_expr


def intersect(a: isl.Set, b: isl.Set) -> isl.Set:
    a = a.align_params(b.get_space())
    b = b.align_params(a.get_space())
    return a.intersect(b)


def context(params: Sequence[str], assumptions: str = "") -> isl.Set:
    """What is known about the size parameters: non-negative, plus the user's assumptions."""
    cons = " and ".join(f"{p} >= 0" for p in params) or "true"
    ctx = isl.Set(f"{params_prefix(list(params))}{{ : {cons} }}")
    if assumptions:
        ctx = intersect(ctx, parse_assumptions(assumptions, params))
    return ctx


def parse_assumptions(text: str, params: Sequence[str]) -> isl.Set:
    """``"n mod 16 = 0 and n >= 16"`` (or a full ISL set) as a parameter set."""
    body = text.strip()
    if not body.startswith("[") and not body.startswith("{"):
        names = [m.group(0) for m in ISL_NAME.finditer(body) if m.group(0) not in ISL_WORDS]
        unknown = [x for x in names if x not in params]
        if unknown:
            raise ParseError(f"assumption {text!r} uses {', '.join(sorted(set(unknown)))}, "
                             f"which are not size parameters ({', '.join(params) or 'none'})")
        body = f"{params_prefix(list(params))}{{ : {body} }}"
    try:
        return isl.Set(body)
    except isl.Error as e:
        raise ParseError(f"invalid assumption (ISL syntax, e.g. 'n mod 16 = 0 and n >= 16'):\n"
                         f"    {text}\n  isl says: {e}") from None


def assumptions_text(params: Sequence[str], *texts: str) -> str:
    """Several assumption texts combined into one ISL parameter set text."""
    s = context(params, "")
    for t in texts:
        if t:
            s = intersect(s, parse_assumptions(t, params))
    return str(s.remove_redundancies())


@dataclass(frozen=True, slots=True)
class ArrayAccess:
    """An access ``array[indices]`` by the instances of a statement domain."""
    domain: str               # the statement's domain text
    iters: tuple[str, ...]
    indices: tuple[Expr, ...]


def infer_extents(array: str, ndim: int, accesses: Sequence[ArrayAccess],
                  params: Sequence[str], assumptions: str = "") -> list[Expr]:
    """The smallest shape holding every element accessed: one past the largest index in each
    dimension, as expressions of the size parameters. Raises ParseError when an index is not
    affine or may be negative."""
    ctx = context(params, assumptions)
    region = None
    for a in accesses:
        try:
            idx = ", ".join(expr_to_isl(i) for i in a.indices)
        except NotAffine:
            raise ParseError(f"cannot infer the shape of '{array}': an index of "
                             f"{array}[{', '.join(str(i) for i in a.indices)}] is not affine; "
                             f"declare it with args=[pl.ArrayArg({array!r}, dtype, shape=...)]"
                             ) from None
        dom = set_(a.domain)
        m = map_(f"{params_prefix(list(params))}{{ {dom.get_tuple_name()}"
                 f"[{', '.join(a.iters)}] -> {array}[{idx}] }}")
        img = _align(m, dom).intersect_domain(_align(dom, m)).range()
        region = img if region is None else _union(region, img)
    if region is None:
        return []
    if region.is_empty():
        raise ParseError(f"cannot infer the shape of '{array}': no instance of the kernel "
                         f"accesses it (the loop domains around its accesses are empty); "
                         f"declare it with args=[pl.ArrayArg({array!r}, dtype, shape=...)]")
    region = _align(region, ctx).intersect_params(_align(ctx, region))
    nonneg = isl.Set.universe(region.get_space())
    for k in range(ndim):
        nonneg = nonneg.lower_bound_val(isl.dim_type.set, k, 0)
    if not region.is_subset(nonneg):
        for k in range(ndim):   # which dimension, for the message
            below = isl.Set.universe(region.get_space()).upper_bound_val(isl.dim_type.set, k, -1)
            if not region.intersect(below).is_empty():
                raise ParseError(f"an index of '{array}' in dimension {k} may be negative; "
                                 "indices must be >= 0 (add an assumption or shift the index)")
    region = region.coalesce()
    known = _align(ctx, region)
    extents: list[Expr] = []
    for k in range(ndim):
        hi = _single_piece(region.dim_max(k).gist_params(known))
        extents.append(pw_aff_to_expr(hi.add_constant_val(isl.Val(1)), [],
                                      f"the extent of '{array}'", upper_bound=True))
    return extents


def _single_piece(hi: isl.PwAff) -> isl.PwAff:
    """One affine piece of ``hi`` that bounds all of it, when there is one (``n - 1`` rather
    than ``max(0, n - 1)``); else ``hi`` itself."""
    pieces = hi.get_pieces()
    if len(pieces) < 2:
        return hi
    for _, aff in pieces:
        cand = isl.PwAff.from_aff(aff)
        if hi.domain().is_subset(hi.le_set(cand)):
            return cand
    return hi


def _align(a, b):
    return a.align_params(b.get_space())


def _union(a: isl.Set, b: isl.Set) -> isl.Set:
    return _align(a, b).union(_align(b, a))
