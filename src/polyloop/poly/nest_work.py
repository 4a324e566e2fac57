# SPDX-License-Identifier: Apache-2.0
"""The work of each loop nest of a lowered kernel, counted exactly by isl for given sizes: the
flops its statement instances perform and the distinct bytes they read and write.

Every store of the loop AST runs once per point of the set its enclosing loops (bounds, steps)
and branches describe; isl counts those points (``count.count_points``) and maps them through
the store's indices to the elements it touches. A call of a tensor intrinsic computes the
instances of its statement that no store of that statement computes (the full tiles); they are
counted from the statement's domain, and its bytes from the statement's accesses.

>>> from polyloop.ir.dtypes import DType
>>> from polyloop.ir.expr import Const, Var, VarKind
>>> from polyloop.ir.loops import For, Store
>>> from polyloop.ir.program import Buffer, BufferRole
>>> n, i = Var("n", VarKind.PARAM), Var("i")
>>> A = Buffer("A", (n,), DType.FLOAT32, BufferRole.INPUT)
>>> B = Buffer("B", (n,), DType.FLOAT32, BufferRole.OUTPUT)
>>> nest = For("i", Const(0, DType.INT64), n, Store("B", (i,), A[i] * 2.0 + 1.0, None, "S"))
>>> nest_work(None, {"A": A, "B": B}, ("n",), nest, [nest], {"n": 1000})
[(2000.0, 8000.0)]
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import islpy as isl

from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Unary, UnaryKind, Var, loads, substitute
from ..ir.loops import Block, Call, For, If, Node, Store
from ..ir.program import Buffer, MemScope, Program
from .count import (count_points, expression_flops, fix_sizes, footprint_elements, instance_flops,
                    statement_instances)
from .isl_util import NotAffine, expr_to_isl, params_prefix

_COMPARE = {BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
            BinOpKind.EQ: "=", BinOpKind.NE: "!="}


def condition_to_isl(e: Expr) -> str:
    """isl text of an affine condition (comparisons joined by and/or); NotAffine otherwise."""
    if isinstance(e, BinOp) and e.op in _COMPARE:
        return f"({expr_to_isl(e.lhs)} {_COMPARE[e.op]} {expr_to_isl(e.rhs)})"
    if isinstance(e, BinOp) and e.op in (BinOpKind.AND, BinOpKind.OR):
        return f"({condition_to_isl(e.lhs)} {e.op.value} {condition_to_isl(e.rhs)})"
    if isinstance(e, Unary) and e.op is UnaryKind.NOT:
        return f"(not {condition_to_isl(e.operand)})"
    if isinstance(e, Const) and isinstance(e.value, bool):
        return "(0 = 0)" if e.value else "(1 = 0)"
    raise NotAffine(e)


@dataclass(slots=True)
class _Tally:
    flops: float | None = 0.0
    reads: dict[str, isl.Set] = field(default_factory=dict)
    writes: dict[str, isl.Set] = field(default_factory=dict)
    produced: dict[str, isl.Set] = field(default_factory=dict)   # plain (not reduction) stores
    extra_bytes: float = 0.0                                      # tensor-intrinsic calls
    exact: bool = True


@dataclass(slots=True)
class _Walk:
    buffers: Mapping[str, Buffer]
    params: tuple[str, ...]
    sizes: Mapping[str, int]
    index: dict[int, int]
    tallies: list[_Tally]
    statements: dict[str, object]
    stored: dict[str, int] = field(default_factory=dict)
    calls: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)


def nest_work(program: Program | None, buffers: Mapping[str, Buffer], params: tuple[str, ...],
              body: Node, regions: Sequence[Node], sizes: Mapping[str, int],
              ) -> list[tuple[float | None, float | None]]:
    """(flops, bytes) of each node of ``regions`` (subtrees of ``body``) for one run of
    ``body`` with the size parameters ``sizes``. Bytes: distinct elements of non-local buffers
    read (not produced by the nest itself) or written, each once. None where a bound, branch or
    index is not affine, or a statement is unknown. ``program`` gives the statements' bodies
    and domains (None: stores count the flops of their own expression)."""
    stmts = {s.name: s for s in program.statements} if program is not None else {}
    walk = _Walk(buffers, params, sizes, {id(n): k for k, n in enumerate(regions)},
                 [_Tally() for _ in regions], stmts)
    _visit(walk, body, [], [], ())
    _add_calls(walk, program)
    return [_result(walk, t) for t in walk.tallies]


def _visit(w: _Walk, node: Node, loops: list[tuple[str, str]], conds: list[str],
           enclosing: tuple[int, ...]) -> None:
    if id(node) in w.index:
        enclosing = enclosing + (w.index[id(node)],)
    if isinstance(node, Block):
        for c in node.body:
            _visit(w, c, loops, conds, enclosing)
    elif isinstance(node, For):
        dim = f"v{len(loops)}"
        names = _renaming(loops)
        try:
            start = expr_to_isl(substitute(node.start, names))
            stop = expr_to_isl(substitute(node.stop, names))
        except NotAffine:
            _inexact(w, enclosing)
            return
        cond = f"{start} <= {dim} < {stop}"
        if node.step != 1:
            cond += f" and exists (e{len(loops)}: {dim} = {start} + {node.step} * e{len(loops)})"
        _visit(w, node.body, loops + [(node.var, dim)], conds + [cond], enclosing)
    elif isinstance(node, If):
        try:
            text = condition_to_isl(substitute(node.cond, _renaming(loops)))
        except NotAffine:
            _inexact(w, enclosing)
            return
        _visit(w, node.then, loops, conds + [text], enclosing)
        if node.otherwise is not None:
            _visit(w, node.otherwise, loops, conds + [f"not {text}"], enclosing)
    elif isinstance(node, Store):
        _store(w, node, loops, conds, enclosing)
    elif isinstance(node, Call):
        w.calls.setdefault(node.statement, []).append(enclosing)


def _renaming(loops: list[tuple[str, str]]) -> dict[str, Expr]:
    return {var: Var(dim) for var, dim in loops}   # later (inner) loops shadow outer ones


def _inexact(w: _Walk, enclosing: tuple[int, ...]) -> None:
    for k in enclosing:
        w.tallies[k].exact = False


def _space(loops: list[tuple[str, str]], conds: list[str]) -> tuple[str, str]:
    dims = ", ".join(dim for _, dim in loops)
    return f"[{dims}]", " and ".join(conds) or "0 = 0"


def _store(w: _Walk, node: Store, loops: list[tuple[str, str]], conds: list[str],
           enclosing: tuple[int, ...]) -> None:
    if not enclosing:
        return
    tuple_, where = _space(loops, conds)
    prefix = params_prefix(w.params)
    points = fix_sizes(isl.Set(f"{prefix}{{ {tuple_} : {where} }}"), w.sizes)
    count = count_points(points)
    statement = w.statements.get(node.statement)
    # a store of no statement is a copy lowering made (a register promotion): bytes, no flops
    if count is None or (w.statements and statement is None and node.statement):
        _inexact(w, enclosing)
        return
    w.stored[node.statement] = w.stored.get(node.statement, 0) + count
    per = (instance_flops(statement) if statement is not None  # type: ignore[arg-type]
           else 0 if not node.statement and w.statements
           else expression_flops(node.value, node.reduction))
    names = _renaming(loops)
    touched = [(ld, False) for ld in loads(node.value)] + [(Load(node.buffer, node.indices,
                                                                 node.value.dtype), True)]
    if node.reduction is not None:
        touched.append((Load(node.buffer, node.indices, node.value.dtype), False))
    regions = []
    for ld, is_write in touched:
        region = _elements(w, ld, names, tuple_, where, prefix)
        if region is None:
            _inexact(w, enclosing)
            return
        regions.append((ld.buffer, is_write, region))
    for k in enclosing:
        t = w.tallies[k]
        t.flops = None if t.flops is None else t.flops + count * per
        for buffer, is_write, region in regions:
            _union(t.writes if is_write else t.reads, buffer, region)
            if is_write and node.reduction is None:
                _union(t.produced, buffer, region)


def _elements(w: _Walk, ld: Load, names: dict[str, Expr], tuple_: str, where: str,
              prefix: str) -> isl.Set | None:
    buffer = w.buffers.get(ld.buffer)
    if buffer is None:
        return None
    try:
        index = ", ".join(expr_to_isl(substitute(i, names)) for i in ld.indices)
    except NotAffine:
        try:
            box = " and ".join(f"0 <= x{k} < {expr_to_isl(s)}" for k, s in enumerate(buffer.shape))
        except NotAffine:
            return None
        dims = ", ".join(f"x{k}" for k in range(buffer.ndim))
        return fix_sizes(isl.Set(f"{prefix}{{ {ld.buffer}[{dims}] : {box or '0 = 0'} }}"), w.sizes)
    m = isl.Map(f"{prefix}{{ {tuple_} -> {ld.buffer}[{index}] : {where} }}")
    return fix_sizes(m.range(), w.sizes)


def _union(table: dict[str, isl.Set], buffer: str, region: isl.Set) -> None:
    table[buffer] = table[buffer].union(region) if buffer in table else region


def _add_calls(w: _Walk, program: Program | None) -> None:
    """Instances of a statement that no store computed ran in its intrinsic's calls: they go to
    the regions holding every call of it; a region holding only some of them is inexact."""
    for statement, places in w.calls.items():
        if program is None or statement not in w.statements:
            for enclosing in places:
                _inexact(w, enclosing)
            continue
        total = statement_instances(program, statement, w.sizes)
        moved = _statement_bytes(program, statement, w.sizes)
        every = set.intersection(*(set(p) for p in places))
        some = set().union(*places) - every
        for k in some:
            w.tallies[k].exact = False
        for k in every:
            t = w.tallies[k]
            if total is None or moved is None or t.flops is None:
                t.exact = False
                continue
            t.flops += (total - w.stored.get(statement, 0)) * instance_flops(
                w.statements[statement])  # type: ignore[arg-type]
            t.extra_bytes += moved


def _statement_bytes(program: Program, statement: str, sizes: Mapping[str, int]) -> float | None:
    total = 0.0
    for buffer, (read, written) in footprint_elements(program, [statement], sizes).items():
        b = program.buffer(buffer)
        if b.scope is MemScope.LOCAL:
            continue
        if read is None or written is None:
            return None
        total += (read + written) * b.dtype.itemsize
    return total


def _result(w: _Walk, t: _Tally) -> tuple[float | None, float | None]:
    if not t.exact:
        return None, None
    moved = t.extra_bytes
    for buffer in set(t.reads) | set(t.writes):
        b = w.buffers[buffer]
        if b.scope is MemScope.LOCAL:
            continue
        read = t.reads.get(buffer)
        if read is not None and buffer in t.produced:
            read = read.subtract(t.produced[buffer])
        n_read = count_points(read) if read is not None else 0
        n_written = count_points(t.writes[buffer]) if buffer in t.writes else 0
        if n_read is None or n_written is None:
            return t.flops, None
        moved += (n_read + n_written) * b.dtype.itemsize
    return t.flops, moved
