# SPDX-License-Identifier: Apache-2.0
"""How many: the number of instances of a statement and of distinct elements a group of
statements touches, for given sizes (what a profile divides its times by).

isl counts the points of a bounded set by enumerating them (fast, about 2 ns a point); a box,
the usual domain, is counted as the product of its extents instead, and a large set that is
not a box is cut along its first dimension until the pieces are boxes or small.

>>> from polyloop.frontend import te
>>> A = te.placeholder((300, 200), "float32", name="A")
>>> B = te.compute((300, 200), lambda i, j: A[i, j] * 2.0, name="B")
>>> p = B.to_program()
>>> statement_instances(p, "B", {})
60000
>>> footprint_elements(p, ["B"], {})
{'A': (60000, 0), 'B': (0, 60000)}
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import islpy as isl

from ..ir.expr import BinOp, BinOpKind, Expr, ReduceKind, Unary, UnaryKind, walk
from ..ir.program import Program, Statement
from .access import accesses, domain

ENUMERATE_UP_TO = 20_000_000   # points isl enumerates at once (about 40 ms)
MAX_SLICES = 50_000            # pieces a set is cut into before giving up


def count_points(s: isl.Set) -> int | None:
    """Number of integer points of ``s`` (all parameters fixed); None when unbounded or too
    irregular to count quickly."""
    s = s.coalesce()
    if s.is_empty():
        return 0
    if not s.is_bounded():
        return None
    budget = [MAX_SLICES]
    total = 0
    for piece in s.make_disjoint().get_basic_sets():
        n = _count(isl.Set.from_basic_set(piece), budget)
        if n is None:
            return None
        total += n
    return total


def _extents(s: isl.Set) -> list[int] | None:
    out = []
    for k in range(s.dim(isl.dim_type.set)):
        lo, hi = s.dim_min_val(k), s.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return None
        out.append(hi.to_python() - lo.to_python() + 1)
    return out


def _count(s: isl.Set, budget: list[int]) -> int | None:
    if s.is_empty():
        return 0
    extents = _extents(s)
    if extents is None:
        return None
    size = 1
    for e in extents:
        size *= e
    if s.is_box():
        return size
    if size > ENUMERATE_UP_TO:
        s, factor = _peel_independent(s, extents)
        if factor > 1:
            n = _count(s, budget)
            return None if n is None else n * factor
    if size <= ENUMERATE_UP_TO:
        return s.count_val().to_python()
    lo = s.dim_min_val(0).to_python()
    budget[0] -= extents[0]
    if budget[0] < 0:
        return None
    total = 0
    for v in range(lo, lo + extents[0]):
        piece = s.fix_val(isl.dim_type.set, 0, isl.Val.int_from_si(s.get_ctx(), v))
        n = _count(piece.project_out(isl.dim_type.set, 0, 1).coalesce(), budget)
        if n is None:
            return None
        total += n
    return total


def _peel_independent(s: isl.Set, extents: list[int]) -> tuple[isl.Set, int]:
    """``s`` without the dimensions that are an interval independent of the others (their
    extents multiplied), and that product."""
    factor = 1
    k = 0
    while k < s.dim(isl.dim_type.set) and s.dim(isl.dim_type.set) > 1:
        lo, hi = s.dim_min_val(k), s.dim_max_val(k)
        rest = s.project_out(isl.dim_type.set, k, 1)
        interval = isl.Set.universe(s.get_space()).lower_bound_val(isl.dim_type.set, k, lo) \
            .upper_bound_val(isl.dim_type.set, k, hi)
        # the inserted dimension is anonymous: give the product ``s``'s space back
        product = rest.insert_dims(isl.dim_type.set, k, 1).reset_space(s.get_space()) \
            .intersect(interval)
        if product.is_equal(s):
            factor *= hi.to_python() - lo.to_python() + 1
            s = rest
        else:
            k += 1
    return s, factor


def fix_sizes(s: isl.Set, sizes: Mapping[str, int]) -> isl.Set:
    """``s`` with the named parameters fixed to ``sizes`` and all parameters projected out."""
    for name, value in sizes.items():
        k = s.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            s = s.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(s.get_ctx(), int(value)))
    return s.project_out(isl.dim_type.param, 0, s.dim(isl.dim_type.param))


def statement_instances(program: Program, statement: str, sizes: Mapping[str, int]) -> int | None:
    """Instances of ``statement`` when the size parameters take the values ``sizes``."""
    return count_points(fix_sizes(domain(program, program.statement(statement)), sizes))


def footprint_elements(program: Program, statements: Sequence[str], sizes: Mapping[str, int],
                       ) -> dict[str, tuple[int | None, int | None]]:
    """Buffer -> (distinct elements read, distinct elements written) by ``statements``; the
    accumulator of a reduction counts as read (unless the group also initialises it) and as
    written. An inexact (non-affine) access counts the whole buffer."""
    reads: dict[str, isl.Set] = {}
    writes: dict[str, isl.Set] = {}
    chosen = set(statements)
    for a in accesses(program):
        if a.statement not in chosen:
            continue
        table = writes if a.is_write else reads
        r = a.relation.range()
        table[a.buffer] = table[a.buffer].union(r) if a.buffer in table else r
    out: dict[str, tuple[int | None, int | None]] = {}
    for b in sorted(set(reads) | set(writes)):
        read, produced = reads.get(b), _plain_writes(program, chosen, b)
        if read is not None and produced is not None:
            read = read.subtract(produced)
        out[b] = (_size(read, program, sizes), _size(writes.get(b), program, sizes))
    return out


def _plain_writes(program: Program, chosen: set[str], buffer: str) -> isl.Set | None:
    """Elements of ``buffer`` a plain (not reduction) store of the group writes: a read of them
    in the group sees the group's own value, not memory (in the programs polyloop builds, the
    write comes first)."""
    region = None
    for a in accesses(program):
        if (a.statement in chosen and a.buffer == buffer and a.is_write
                and program.statement(a.statement).reduction is None):
            r = a.relation.range()
            region = r if region is None else region.union(r)
    return region


def _size(s: isl.Set | None, program: Program, sizes: Mapping[str, int]) -> int | None:
    if s is None:
        return 0
    return count_points(fix_sizes(s, sizes))


_FLOP_BINOPS = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.DIV,
                          BinOpKind.MIN, BinOpKind.MAX, BinOpKind.POW, BinOpKind.FMOD})
_FLOP_UNARY = frozenset({UnaryKind.EXP, UnaryKind.LOG, UnaryKind.SQRT, UnaryKind.TANH,
                         UnaryKind.SIN, UnaryKind.COS, UnaryKind.TAN, UnaryKind.ERF})


def instance_flops(statement: Statement) -> int:
    """Floating-point operations of one instance: each float +, -, *, /, min, max, exp, log,
    sqrt, tanh, plus one for a reduction's update (index arithmetic does not count)."""
    return expression_flops(statement.value, statement.reduction)


def expression_flops(value: Expr, reduction: ReduceKind | None) -> int:
    """The flops of ``value``, plus one when it updates a float accumulator."""
    n = 1 if reduction is not None and value.dtype.is_float else 0
    for e in walk(value):
        if isinstance(e, BinOp) and e.op in _FLOP_BINOPS and e.dtype.is_float:
            n += 1
        elif isinstance(e, Unary) and e.op in _FLOP_UNARY and e.dtype.is_float:
            n += 1
    return n
