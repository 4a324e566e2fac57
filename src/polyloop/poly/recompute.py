# SPDX-License-Identifier: Apache-2.0
"""The region a recomputation fills: for each iteration of a consumer's outer loops, the
elements of a buffer (or the argument tuples of a substitution rule) its statements read,
and where those elements lie overall (the bounds of the temporary that holds them).

A recomputation writes ``T[outer..., x...]`` for every element ``x`` read in that iteration
(halo included: exactly the image of the read accesses, computed by isl), so iterations that
need the same element each compute their own copy and none waits for another.

>>> # recompute_domain(program, {"C": ["{ C[i, j] -> [(i)] }"]}, "B", "B_re", ["i"], ["x"])
>>> #   -> "[n] -> { B_re[i, x] : 0 <= i < n and i - 1 <= x <= i + 1 }"
"""
from __future__ import annotations

import islpy as isl

from ..errors import ScheduleError
from ..ir.expr import BinOpKind, Expr, binop, const
from ..ir.program import Program
from ..ir.simplify import simplify
from .affine import prefix_map
from .isl_util import printed, set_, with_params
from .regions import aff_to_expr
from .storage import fetch_domain


def recompute_domain(program: Program, consumers: dict[str, list[str]], buffer: str,
                     name: str, outer: list[str], dims: list[str],
                     within: str | None = None) -> str:
    """``name[outer..., dims...]``: for each value of the consumers' outer loop expressions,
    the elements of ``buffer`` they read; with ``within`` (a producer's domain, one dimension
    per element index) only the elements the producer defines."""
    try:
        # every element the consumers name (not clipped to a buffer: a rule or a producer
        # defines its values by its own domain, ``within``)
        _, text = fetch_domain(program, consumers, buffer, name, outer, dims)
    except ValueError:
        raise ScheduleError(f"no statement under the loop reads '{buffer}'") from None
    if within is None:
        return text
    dom = set_(text)
    prod = set_(with_params(program.params, within)).reset_tuple_id()
    prod = prod.insert_dims(isl.dim_type.set, 0, len(outer)).set_tuple_name(name)
    for k, it in enumerate(outer + dims):
        prod = prod.set_dim_name(isl.dim_type.set, k, it)
    prod = prod.align_params(dom.get_space())
    dom = dom.align_params(prod.get_space())
    return printed(dom.intersect(prod).coalesce())


def image_domain(program: Program, stmt: str, exprs: list[str], name: str, names: list[str],
                 ranges: list[tuple[str, int, int]] = ()) -> str:
    """``name[names..., extra...]``: the values the loop expressions ``exprs`` take over the
    statement's domain, each combined with every value ``lo <= d < hi`` of the extra
    dimensions ``ranges`` (``(d, lo, hi)``)."""
    dom = set_(with_params(program.params, program.statement(stmt).domain))
    if exprs:
        key = prefix_map(program, stmt, exprs)
        img = key.intersect_domain(dom.align_params(key.get_space())).range()
    else:
        img = dom.project_out(isl.dim_type.set, 0, dom.dim(isl.dim_type.set))
    img = img.reset_tuple_id().insert_dims(isl.dim_type.set, len(exprs), len(ranges))
    for k, (_, lo, hi) in enumerate(ranges):
        pos = len(exprs) + k
        img = img.lower_bound_val(isl.dim_type.set, pos, isl.Val(lo))
        img = img.upper_bound_val(isl.dim_type.set, pos, isl.Val(hi - 1))
    img = img.set_tuple_name(name)
    for k, it in enumerate(list(names) + [d for d, _, _ in ranges]):
        img = img.set_dim_name(isl.dim_type.set, k, it)
    return printed(img.coalesce())


def dim_bounds(program: Program, domain_text: str, first: int) -> list[tuple[Expr, Expr]]:
    """For each dimension from ``first`` on: a lower bound of its values and one past an
    upper bound, as expressions of the size parameters (the smallest and largest piece where
    isl's bound is piecewise: still bounds everywhere)."""
    dom = set_(with_params(program.params, domain_text))
    out = []
    for k in range(first, dom.dim(isl.dim_type.set)):
        lo = _bound(dom.dim_min(k), BinOpKind.MIN, f"the lowest index of dimension {k}")
        hi = _bound(dom.dim_max(k), BinOpKind.MAX, f"the highest index of dimension {k}")
        out.append((lo, simplify(binop(BinOpKind.ADD, hi, const(1, hi.dtype)))))
    return out


def _bound(pa: isl.PwAff, pick: BinOpKind, what: str) -> Expr:
    pieces = pa.get_pieces()
    if not pieces:
        raise ScheduleError(f"{what} is unbounded; bound the loops around the use")
    out = None
    for _, aff in pieces:
        e = aff_to_expr(aff, [])
        out = e if out is None else binop(pick, out, e)
    return simplify(out)  # type: ignore[arg-type]


__all__ = ["dim_bounds", "image_domain", "recompute_domain"]
