# SPDX-License-Identifier: Apache-2.0
"""Access relations of statements: which buffer elements each statement instance touches."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import islpy as isl

from ..ir.expr import Load, loads
from ..ir.program import Program, Statement
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, set_, with_params


@dataclass(frozen=True, slots=True)
class Access:
    statement: str
    buffer: str
    is_write: bool
    is_accumulator: bool     # the target of a reduction update, read and written
    exact: bool              # False: a non-affine index, over-approximated by the whole buffer
    relation: isl.Map        # S[i, ...] -> buffer[x, ...], restricted to the domain


def domain(program: Program, stmt: Statement) -> isl.Set:
    return set_(with_params(program.params, stmt.domain))


def buffer_box(program: Program, name: str) -> isl.Set:
    """{ name[x0, ...] : 0 <= xk < shape_k } where the shape is affine; unbounded otherwise."""
    buf = program.buffer(name)
    dims = [f"x{k}" for k in range(buf.ndim)]
    cons = []
    for d, ext in zip(dims, buf.shape):
        try:
            cons.append(f"0 <= {d} < {expr_to_isl(ext)}")
        except NotAffine:
            cons.append(f"0 <= {d}")
    body = " and ".join(cons)
    return set_(f"{params_prefix(program.params)}{{ {name}[{', '.join(dims)}]"
                + (f" : {body} }}" if body else " }"))


def _relation(program: Program, stmt: Statement, load: Load) -> tuple[isl.Map, bool]:
    head = f"{params_prefix(program.params)}{{ {stmt.name}[{', '.join(stmt.iters)}] -> "
    try:
        idx = ", ".join(expr_to_isl(i) for i in load.indices)
    except NotAffine:
        box = buffer_box(program, load.buffer)
        rel = isl.Map.from_domain_and_range(domain(program, stmt), box)
        return rel, False
    return _on_domain(f"{head}{load.buffer}[{idx}] }}",
                      with_params(program.params, stmt.domain)), True


@lru_cache(maxsize=4096)
def _on_domain(relation: str, domain_text: str) -> isl.Map:
    """An access relation's text restricted to a statement domain's text, remembered: the
    rewrites of lowering (a temporary compacted, a load redirected) make new statements
    whose other accesses are unchanged."""
    return map_(relation).intersect_domain(set_(domain_text))


@lru_cache(maxsize=1024)
def _accesses_cached(program: Program) -> tuple[Access, ...]:
    out: list[Access] = []
    for s in program.statements:
        out.extend(_statement_accesses(program, s))
    return tuple(out)


# A statement's exact accesses depend only on it and the size parameters: remembered per
# statement object (immutable, held alive so that its id stays its own), so that a program
# rewritten in one statement (a prefetch, a compacted temporary) re-derives only that one.
_BY_STATEMENT: dict[tuple, tuple[Statement, tuple[Access, ...]]] = {}


def _statement_accesses(program: Program, s: Statement) -> tuple[Access, ...]:
    key = (tuple(program.params), id(s))
    got = _BY_STATEMENT.get(key)
    if got is not None and got[0] is s:
        return got[1]
    out: list[Access] = []
    rel, exact = _relation(program, s, s.target)
    acc = s.reduction is not None
    out.append(Access(s.name, s.buffer, True, acc, exact, rel))
    if acc:
        out.append(Access(s.name, s.buffer, False, True, exact, rel))
    value_reads = loads(s.value) + [ld for ix in s.indices for ld in loads(ix)]
    for ld in value_reads:
        r, ex = _relation(program, s, ld)
        out.append(Access(s.name, ld.buffer, False, False, ex, r))
    result = tuple(out)
    if all(a.exact for a in result):     # an inexact one is the buffer's box: the program's
        if len(_BY_STATEMENT) >= 4096:
            _BY_STATEMENT.clear()
        _BY_STATEMENT[key] = (s, result)
    return result


def clear_caches() -> None:
    """Forget the remembered accesses (for timing code generation from scratch)."""
    _accesses_cached.cache_clear()
    _on_domain.cache_clear()
    _BY_STATEMENT.clear()


def accesses(program: Program) -> tuple[Access, ...]:
    """Every access of every statement (a reduction's accumulator appears as write and read)."""
    return _accesses_cached(program)


def footprint(program: Program, stmts: Sequence[str], buffer: str, *,
              writes: bool) -> isl.Set | None:
    """The elements of ``buffer`` that the statements write (or read); None when they do not."""
    region = None
    for a in accesses(program):
        if a.statement in stmts and a.buffer == buffer and a.is_write == writes:
            r = a.relation.range()
            region = r if region is None else region.union(r)
    return region
