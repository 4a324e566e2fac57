# SPDX-License-Identifier: Apache-2.0
"""Storage compaction: can a temporary be a small array reused by every iteration of a loop?

A temporary of scope 'shared' (a work-group's local memory) or 'local' (private memory) is
needed whole only when values flow between iterations of the loops around its uses. When, for
each iteration of its *home* loop (the innermost loop around all its accesses), the elements
accessed fit in a box of constant size and every value read was written in the same iteration
(exact dataflow), the temporary can be that box, shifted to the iteration's corner.

>>> # compact(program, root, "A_shared") -> Compaction(shape=(16, 16), ...) or a reason string
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from ..ir.expr import Expr
from ..ir.loops import LoopKind
from ..ir.program import MemScope, Program
from ..ir.simplify import simplify
from .access import accesses, buffer_box, domain
from .affine import prefix_map
from .dataflow import flow
from .deps import DepKind, Dependence
from .deps import compute as compute_deps
from .gpu import is_item, statement_paths
from .isl_util import out_dims, printed, set_, solved_dim
from .loop_expr import LoopExpr
from .regions import pw_aff_to_expr
from .legality import carries, time_deltas
from .tree import (LoopNode, Root, common_loops, flat_schedule, loop_position, loops,
                   statements_under)


@dataclass(frozen=True, slots=True)
class Compaction:
    """The compacted shape and, per statement, the corner of the box it accesses in each
    dimension of more than one element (an expression of the statement's iterators, to
    subtract from that index; a dimension of one element is indexed 0)."""
    buffer: str
    home: str | None                           # the home loop's name, None: the whole program
    shape: tuple[int, ...]
    offsets: dict[str, tuple[Expr, ...]]
    stages: int = 1                 # boxes the temporary rotates through (double buffering)
    rotating: int | None = None     # with stages > 1: the dimension whose index picks the box
    # the names of the loops from the outermost down to the home loop, when known: loops of
    # different statements may share a name, so the home loop's name alone may find another
    home_path: tuple[str, ...] = ()


def _align(a, b):
    return a.align_params(b.get_space())


def _key_loops(program: Program, paths: dict[str, list[LoopNode]], stmts: list[str],
               scope: MemScope) -> dict[str, list[LoopNode]] | str:
    """Per statement, the loops whose iterations each get their own box: the loops common to
    all accesses and, for private memory, the work-item loops of each statement below them
    (a work-item keeps its private memory from one nest of the launch to the next, so
    ``acc = 0`` and ``acc += ...`` under different ``l.0`` loops share the work-item's box)."""
    common = paths[stmts[0]]
    for s in stmts[1:]:
        p = paths[s]
        k = 0
        while k < min(len(common), len(p)) and common[k].id == p[k].id:
            k += 1
        common = common[:k]
    if scope is MemScope.LOCAL:
        items = {s: sorted((n for n in paths[s][len(common):] if is_item(n)),
                           key=lambda n: n.thread.value) for s in stmts}
        axes = {tuple(str(n.thread) for n in v) for v in items.values()}
        if len(axes) > 1:
            return ("its accesses run on different work-item axes "
                    f"({' vs '.join(', '.join(a) or 'none' for a in sorted(axes))}), so private "
                    "memory cannot hold what different work-items exchange")
        return {s: common + items[s] for s in stmts}
    if scope is MemScope.SHARED:
        # a work-group's memory is shared by its work-items: one box for all of them
        cut = next((k for k, n in enumerate(common) if is_item(n)), len(common))
        common = common[:cut]
        parallel = [n.name for n in common if n.kind is LoopKind.PARALLEL]
        if parallel:
            return (f"it is shared by the threads of parallel loop '{parallel[0]}'; scope "
                    "'local' gives each thread its own copy")
    return {s: common for s in stmts}


def _key_map(program: Program, stmt: str, key: list[LoopNode]) -> isl.Map:
    if key:
        return prefix_map(program, stmt, [n.expr(stmt) for n in key])
    s = program.statement(stmt)
    pre = f"[{', '.join(program.params)}] -> " if program.params else ""
    return isl.Map(f"{pre}{{ {s.name}[{', '.join(s.iters)}] -> [] }}").intersect_domain(
        domain(program, s))


def compact(program: Program, root: Root, buffer: str) -> Compaction | str:
    """The compaction of ``buffer`` under the loop tree ``root``, or why there is none."""
    scope = program.buffer(buffer).scope
    acc = [a for a in accesses(program) if a.buffer == buffer]
    if not acc:
        return "it is never accessed"
    if not all(a.exact for a in acc):
        return "an index is not affine"
    paths = statement_paths(root)
    stmts = list(dict.fromkeys(a.statement for a in acc))
    key = _key_loops(program, paths, stmts, scope)
    if isinstance(key, str):
        return key
    keys = {s: _key_map(program, s, key[s]) for s in stmts}
    home = key[stmts[0]]
    result = compact_with_keys(program, root, buffer, keys, home[-1].name if home else None)
    if isinstance(result, str):
        return result
    if not home:
        return result
    path = paths[stmts[0]]
    depth = next(k for k, n in enumerate(path) if n.id == home[-1].id)
    return replace(result, home_path=tuple(n.name for n in path[:depth + 1]))


def compact_with_keys(program: Program, root: Root, buffer: str, keys: dict[str, isl.Map],
                      home_name: str | None) -> Compaction | str:
    """The compaction of ``buffer`` given, per statement accessing it, the map from its
    instances to their key (the iteration each gets its own box in), or why there is none."""
    acc = [a for a in accesses(program) if a.buffer == buffer]
    stmts = list(keys)
    footprint = None
    for a in acc:
        f = keys[a.statement].reverse().apply_range(_align(a.relation, keys[a.statement]))
        footprint = f if footprint is None else _align(footprint, f).union(_align(f, footprint))
    assert footprint is not None
    footprint = footprint.coalesce()
    # no element touched by two key iterations (an accumulator per work-item, a prefetch
    # buffer indexed by its outer loops): no value can pass from one to another
    if not footprint.is_injective():
        reason = _values_stay(program, root, buffer, keys)
        if reason:
            return reason
    nd = footprint.dim(isl.dim_type.out)
    if footprint.is_single_valued():    # one element per key iteration (an accumulator)
        return Compaction(buffer, home_name, (1,) * nd, {s: () for s in stmts})
    shape, corners, kept = [], None, 0
    fixed = _fixed_by_key(footprint)
    for d in range(nd):
        if d in fixed:                  # one index per key iteration: 0 once compacted
            shape.append(1)
            continue
        fd = out_dims(footprint, d)
        corner = fd.lexmin().coalesce()
        width = fd.sum(_align(corner, fd).neg()).range()
        # the largest width over all parameter values: a constant when the box has one
        width = width.project_out(isl.dim_type.param, 0, width.dim(isl.dim_type.param))
        if width.is_empty() or not width.is_bounded():
            return f"its footprint in dimension {d} has no constant size"
        hi = width.dim_max(0)
        vals = {a.get_constant_val().to_python() for _, a in hi.get_pieces()} \
            if hi.is_cst() else set()
        if len(vals) != 1:
            return f"its footprint in dimension {d} has no constant size"
        shape.append(vals.pop() + 1)
        if shape[-1] == 1:      # one index per key iteration after all: 0 once compacted
            continue
        kept += 1
        corners = corner if corners is None else _align(corners, corner).flat_range_product(
            _align(corner, corners))
    # the corners of the dimensions kept, at once, composed with each statement's key map
    offsets: dict[str, tuple[Expr, ...]] = {s: () for s in stmts}
    for s in stmts if corners is not None else ():
        per_dim = _offsets(program, s, keys[s], corners, kept, pullback=False)
        if isinstance(per_dim, str):    # piecewise: try the other formulation before refusing
            per_dim = _offsets(program, s, keys[s], corners, kept, pullback=True)
        if isinstance(per_dim, str):
            return per_dim
        offsets[s] = per_dim
    return Compaction(buffer, home_name, tuple(shape), offsets)


def _fixed_by_key(footprint: isl.Map) -> set[int]:
    """The element dimensions the key iteration determines through an equality of the
    footprint's affine hull (``x0 = k0``: a prefetch buffer indexed by the outer loops), found
    at once; the others are asked one by one."""
    hull = footprint.affine_hull()
    nd = footprint.dim(isl.dim_type.out)
    found = (solved_dim(c, isl.dim_type.out, nd) for c in hull.get_constraints())
    return {d for d in found if d is not None}


def _offsets(program: Program, stmt: str, key: isl.Map, corners: isl.Map, nd: int, *,
             pullback: bool) -> tuple[Expr, ...] | str:
    """The footprint's corner for each instance of ``stmt`` (``corners`` of its key values), one
    expression of its iterators per dimension, or why not (a piecewise corner). Composed as
    maps and simplified on the key's domain, or (``pullback``) as piecewise affine functions."""
    st = program.statement(stmt)
    if pullback:
        pma = isl.PwMultiAff.from_map(key)
        corner_all = isl.PwMultiAff.from_map(corners)
        off_all = _align(corner_all, pma).pullback_pw_multi_aff(_align(pma, corner_all))
        off_all = off_all.coalesce().gist(_align(key.domain(), off_all))
    else:
        composed = key.apply_range(_align(corners, key)).gist_domain(key.domain())
        if not composed.is_single_valued():     # the pullback may still give one corner
            return f"the corner of its footprint is not one point per instance of '{stmt}'"
        off_all = isl.PwMultiAff.from_map(composed)
    per_dim = []
    for d in range(nd):
        off = off_all.get_pw_aff(d).coalesce()
        try:
            per_dim.append(simplify(pw_aff_to_expr(off, st.iters, "a footprint corner")))
        except Exception:
            return f"the corner of its footprint is piecewise for '{stmt}' ({off})"
    return tuple(per_dim)


def _values_stay(program: Program, root: Root, buffer: str,
                 keys: dict[str, isl.Map]) -> str | None:
    """None when every value read from ``buffer`` was written in the same key iteration."""
    if _elements_stay(program, buffer, keys):
        return None
    deps, _ = flow(program, flat_schedule(program, root), buffer)
    if deps is None or deps.is_empty():
        return None
    same = None
    for s, ks in keys.items():
        for t, kt in keys.items():
            m = _align(ks, kt).apply_range(_align(kt, ks).reverse())
            u = isl.UnionMap.from_map(m)
            same = u if same is None else same.union(u)
    assert same is not None
    if program.assumptions:     # no flow at sizes the program promises never happen
        deps = deps.intersect_params(set_(program.assumptions).align_params(deps.get_space()))
    if deps.is_subset(same.align_params(deps.get_space())):
        return None
    return "a value written in one iteration of its home loop is read in another"


def thread_loop_sharing(program: Program, root: Root, buffer: str) -> LoopNode | None:
    """A GPU loop two iterations of which access one element of ``buffer`` (one writing), or
    None. Legality lets such loops run in parallel when each iteration has its own copy of a
    'shared' (per work-group) or 'local' (per work-item) temporary; a temporary that cannot
    be given a copy per iteration must then not be one array for all."""
    from_deps = None
    for node in loops(root):
        if node.kind is not LoopKind.THREAD or node.thread is None:
            continue
        scope = program.buffer(buffer).scope
        if node.thread.is_item and scope is not MemScope.LOCAL:
            continue
        stmts = set(statements_under(node))
        if from_deps is None:
            schedule = flat_schedule(program, root)
            from_deps = [(d, schedule) for d in compute_deps(program, schedule)
                         if d.buffer == buffer]
        pos = loop_position(root, node.id)
        for d, schedule in from_deps:
            if d.source in stmts and d.sink in stmts and carries(
                    time_deltas(schedule[d.source], schedule[d.sink], d), pos):
                return node
    return None


def _elements_stay(program: Program, buffer: str, keys: dict[str, isl.Map]) -> bool:
    """Does every write of ``buffer`` touch only elements that no other key iteration reads?
    Then no value can flow between key iterations, whatever the order: a cheap sufficient
    test (a private accumulator ``acc[i, j]``) before exact dataflow under the schedule.

    Asked in the key space: with each access's ``element -> key`` relation (the key maps are
    functions of the instance), the pairs (write key, read key) of instances that touch one
    element must all be equal keys, for all writes and reads at once."""
    written = read = None
    for a in accesses(program):
        if a.buffer != buffer:
            continue
        k = keys[a.statement]
        e = _align(a.relation, k).reverse().apply_range(_align(k, a.relation))
        if a.is_write:
            written = e if written is None else _align(written, e).union(_align(e, written))
        else:
            read = e if read is None else _align(read, e).union(_align(e, read))
    if written is None or read is None:
        return True
    pairs = _align(written, read).reverse().apply_range(_align(read, written))
    return bool(pairs.is_subset(isl.Map.identity(pairs.get_space())))


def fetch_domain(program: Program, consumers: dict[str, list[str]], buffer: str, name: str,
                 outer: list[str], dims: list[str]) -> tuple[str, str]:
    """The domain of a prefetch: for each value of the consumers' outer loops (``consumers``
    maps a statement to its outer loop expressions), the elements of ``buffer`` it reads:
    ``name[outer..., dims...]``. Returned twice: clipped to the buffer (what the copy runs
    over: a read under ``where``, as in padding, names elements outside the buffer where it
    does not run, and a copy of those would read outside the array), and unclipped (the box
    of every element named, whose corner is affine where the clipped one is not: the copy's
    loops count from it, ``fetch_loop_exprs``)."""
    region = None
    for stmt, exprs in consumers.items():
        key = prefix_map(program, stmt, exprs)
        for a in accesses(program):
            if a.statement == stmt and a.buffer == buffer and not a.is_write:
                f = key.reverse().apply_range(_align(a.relation, key))
                region = f if region is None else _align(region, f).union(_align(f, region))
    if region is None:
        raise ValueError(f"no statement reads {buffer}")
    inside = region.intersect_range(_align(buffer_box(program, buffer), region))
    return _named(inside, name, outer + dims), _named(region, name, outer + dims)


def _named(region: isl.Map, name: str, dims: list[str]) -> str:
    s = region.coalesce().wrap().flatten().set_tuple_name(name)
    for k, it in enumerate(dims):
        s = s.set_dim_name(isl.dim_type.set, k, it)
    return printed(s)


def fetch_loop_exprs(domain_text: str, n_outer: int) -> list[LoopExpr]:
    """Loop expressions for the copy dimensions of a prefetch whose domain is
    ``P[outer..., dims...]``: each dimension counted from the corner of the box fetched for the
    outer values (``{ P[io, x0] -> [(x0 - 16*io)] }``), so the loops have constant extents.
    Give it the unclipped domain (``fetch_domain``'s second): the corner of a box clipped to
    the buffer is piecewise (``max(16*io - 1, 0)``)."""
    dom = set_(domain_text)
    n = dom.dim(isl.dim_type.set)
    same = dom.identity()    # P[x] -> P[x] on the domain; each map below keeps some of x

    def keep(first: int, count: int) -> isl.Map:
        return out_dims(same, first, count).reset_tuple_id(isl.dim_type.out)
    outer = keep(0, n_outer)
    by_outer = outer.reverse().apply_range(keep(n_outer, n - n_outer))
    out = []
    for k in range(n - n_outer):
        corner = outer.apply_range(out_dims(by_outer, k).lexmin())
        x = keep(n_outer + k, 1)
        out.append(LoopExpr.of(x.sum(_align(corner, x).neg()).coalesce()))
    return out


def fetch_dependence(program: Program, copy: str, consumer: str,
                     schedule: dict[str, isl.Map] | None = None) -> Dependence | None:
    """The RAW dependence from a prefetch's copy statement (which writes the buffer named like
    it) to its consumer, under ``schedule``: the only dependence a prefetch adds when the
    buffer it copies from is never written. Without ``schedule``, every pair that touches one
    element (for a schedule that runs each copy instance before every read of its element,
    as ``add_prefetch``'s does: then the order restricts nothing)."""
    acc = accesses(program)
    writes = [a.relation for a in acc if a.statement == copy and a.is_write]
    reads = [a.relation for a in acc if a.statement == consumer and a.buffer == copy
             and not a.is_write]
    rel = None
    for w in writes:
        for r in reads:
            m = w.apply_range(_align(r, w).reverse())
            rel = m if rel is None else _align(rel, m).union(_align(m, rel))
    if rel is None:
        return None
    if schedule is not None:
        rel = rel.intersect(_align(schedule[copy].lex_lt_map(schedule[consumer]), rel))
    rel = rel.coalesce()
    return None if rel.is_empty() else Dependence(DepKind.RAW, copy, consumer, copy, rel)


def private_loops(program: Program, root: Root, buffer: str) -> list[LoopNode]:
    """The outermost loops around every access of ``buffer`` such that no value of it flows
    from one of their iterations to another: each iteration could have its own copy."""
    acc = [a for a in accesses(program) if a.buffer == buffer]
    if not acc or not all(a.exact for a in acc):
        return []
    paths = statement_paths(root)
    stmts = list(dict.fromkeys(a.statement for a in acc))
    common = common_loops([paths[s] for s in stmts])
    while common:
        keys = {s: _key_map(program, s, common) for s in stmts}
        if _values_stay(program, root, buffer, keys) is None:
            return common
        common = common[:-1]
    return []
