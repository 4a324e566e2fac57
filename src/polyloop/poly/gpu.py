# SPDX-License-Identifier: Apache-2.0
"""GPU questions about a scheduled loop tree, answered exactly with isl.

A launch runs one top-level nest: loops bound to ``blockIdx.*`` are work-groups, loops bound to
``threadIdx.*`` are the work-items of a group, running in parallel. Between work-items, only a
barrier orders memory accesses. ``barrier_gaps`` finds where barriers are needed: wherever a
dependence links two statement instances run by different work-items of one group (no missing
barriers), and nowhere else (no needless ones). The other functions measure launch sizes.
"""
from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from ..errors import BuildError
from ..ir.expr import Expr
from ..ir.program import MemScope, Program
from ..ir.simplify import simplify
from .access import domain
from .affine import prefix_map, value_range
from .access import Access, accesses
from .deps import DepKind, Dependence
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix, printed, set_
from .legality import time_deltas
from .regions import pw_aff_to_expr
from .tree import LoopNode, Node, Root, StmtNode, loop_position, statements_under

AXES = ("x", "y", "z")


def is_group(n: LoopNode) -> bool:
    return n.thread is not None and n.thread.startswith("blockIdx.")


def is_item(n: LoopNode) -> bool:
    return n.thread is not None and n.thread.startswith("threadIdx.")


def statement_paths(root: Root) -> dict[str, list[LoopNode]]:
    """Statement -> the loops around it, outermost first."""
    out: dict[str, list[LoopNode]] = {}

    def go(n: Node | Root, acc: list[LoopNode]) -> None:
        if isinstance(n, StmtNode):
            out[n.statement] = acc
            return
        here = acc + [n] if isinstance(n, LoopNode) else acc
        for c in n.children:
            go(c, here)
    go(root, [])
    return out


def _full(program: Program, text: str) -> isl.Map:
    if not text.lstrip().startswith("["):
        text = params_prefix(program.params) + text
    return map_(text)


def _align(a, b):
    return a.align_params(b.get_space())


def item_map(program: Program, path: list[LoopNode], stmt: str) -> isl.Map:
    """``S[...] -> [x, y, z]``: the work-item index that runs each instance (0 on axes without
    a work-item loop)."""
    s = program.statement(stmt)
    head = f"{{ {s.name}[{', '.join(s.iters)}] -> "
    m = None
    for axis in AXES:
        loops = [n for n in path if n.thread == f"threadIdx.{axis}"]
        piece = _full(program, loops[0].expr(stmt)) if loops else _full(program, head + "[0] }")
        m = piece if m is None else _align(m, piece).flat_range_product(_align(piece, m))
    assert m is not None
    return m.intersect_domain(_align(domain(program, s), m))


@dataclass(frozen=True, slots=True)
class Gap:
    """A barrier among the children of ``loop`` (None: the launch's top level), before child
    ``index`` (``index == len(children)``: at the end of the body). ``global_memory``: some
    dependence it orders goes through a global buffer."""
    loop: int | None
    index: int
    global_memory: bool


def cross_item_dependences(program: Program, root: Root,
                           schedule: dict[str, isl.Map]) -> list[Dependence]:
    """The dependences of one launch between instances run by different work-items (only
    those: pairs of accesses that always meet on one work-item are never ordered)."""
    paths = statement_paths(root)
    items = {s: item_map(program, p, s) for s, p in paths.items()}
    by_buffer: dict[str, list[Access]] = {}
    for a in accesses(program):
        # private memory: every work-item has its own copy (storage placement made sure no
        # value has to travel between work-items through it)
        if program.buffer(a.buffer).scope is MemScope.LOCAL:
            continue
        if a.statement in paths and not (a.is_accumulator and not a.is_write):
            by_buffer.setdefault(a.buffer, []).append(a)
    out = []
    for buf, group in by_buffer.items():
        if not any(a.is_write for a in group):
            continue
        for k, a in enumerate(group):
            for b in group[k:]:
                if not (a.is_write or b.is_write):
                    continue
                touch = a.relation.apply_range(_align(b.relation, a.relation).reverse())
                ia, ib = items[a.statement], items[b.statement]
                same = _align(ia, ib).apply_range(_align(ib, ia).reverse())
                cross = touch.subtract(_align(same, touch))
                if cross.is_empty():
                    continue
                for x, y, rel in ((a, b, cross), (b, a, cross.reverse())):
                    before = schedule[x.statement].lex_lt_map(schedule[y.statement])
                    rel = rel.intersect(_align(before, rel))
                    if not rel.is_empty():
                        kind = (DepKind.WAW if x.is_write and y.is_write else
                                DepKind.RAW if x.is_write else DepKind.WAR)
                        out.append(Dependence(kind, x.statement, y.statement, buf, rel))
                    if a is b:
                        break
    return out


def barrier_gaps(program: Program, root: Root, deps: list[Dependence],
                 schedule: dict[str, isl.Map]) -> list[Gap]:
    """Where one launch (``root`` has one top-level nest) needs work-group barriers, given its
    dependences between different work-items (``cross_item_dependences``)."""
    if not deps:
        return []
    cross = [(d, _Profile(time_deltas(schedule[d.source], schedule[d.sink], d))) for d in deps]
    out: list[Gap] = []
    for node, depth in _group_level(root):
        out += _gaps_at(program, root, node, depth, cross)
    return out


class _Profile:
    """What the barrier placement asks about one dependence, from its time deltas (one set,
    computed once): do some of its pairs agree on the first ``n`` schedule dimensions
    (``agree(n)``), and does the loop at dimension ``p`` carry some (``carried(p)``)?"""

    def __init__(self, deltas: isl.Set):
        self.levels = [deltas]        # deltas with the first k dimensions fixed to 0

    def _level(self, k: int) -> isl.Set:
        while len(self.levels) <= k:
            j = len(self.levels) - 1
            self.levels.append(self.levels[j].fix_val(isl.dim_type.set, j, 0))
        return self.levels[k]

    def agree(self, n: int) -> bool:
        return not self._level(n).is_empty()

    def carried(self, p: int) -> bool:
        same = self._level(p)
        if same.is_empty():
            return False
        ctx = same.get_ctx()
        t = isl.dim_type.set
        return not (same.lower_bound_val(t, p, isl.Val.int_from_si(ctx, 1)).is_empty()
                    and same.upper_bound_val(t, p, isl.Val.int_from_si(ctx, -1)).is_empty())


def _group_level(root: Root) -> list[tuple[LoopNode | Root, int]]:
    """The nodes whose children run in sequence for the whole group: the root and every loop
    that is neither a work-item loop nor inside one."""
    out: list[tuple[LoopNode | Root, int]] = [(root, 0)]

    def go(n: LoopNode) -> None:
        if is_item(n):
            return
        out.append((n, 0))
        for c in n.children:
            if isinstance(c, LoopNode):
                go(c)
    for c in root.children:
        if isinstance(c, LoopNode):
            go(c)
    return out


def _gaps_at(program: Program, root: Root, node: LoopNode | Root, _: int,
             cross: list[tuple[Dependence, _Profile]]) -> list[Gap]:
    kids = node.children
    where = {s: k for k, c in enumerate(kids) for s in statements_under(c)}
    loop_id = node.id if isinstance(node, LoopNode) else None
    n_equal = loop_position(root, node.id) + 1 if isinstance(node, LoopNode) else 0
    linear: list[tuple[int, int, bool]] = []
    wrap: list[tuple[int, int, bool]] = []
    for d, x in cross:
        if d.source not in where or d.sink not in where:
            continue
        i, j = where[d.source], where[d.sink]
        glob = program.buffer(d.buffer).scope.value == "global"
        if x.agree(n_equal):
            if i == j:
                if isinstance(kids[i], LoopNode) and is_item(kids[i]):
                    _inside_items(kids[i], d)
            else:
                linear.append((i + 1, j, glob))
        if isinstance(node, LoopNode) and not is_group(node):
            if x.carried(loop_position(root, node.id)):
                wrap.append((i + 1, j, glob))
    chosen: dict[int, bool] = {}
    for lo, hi, glob in sorted(linear, key=lambda t: t[1]):
        hit = [g for g in chosen if lo <= g <= hi]
        if hit:
            chosen[hit[0]] = chosen[hit[0]] or glob
        else:
            chosen[hi] = glob
    for lo, hi, glob in wrap:
        hit = [g for g in chosen if g >= lo or g <= hi]
        if hit:
            chosen[hit[0]] = chosen[hit[0]] or glob
        else:
            chosen[len(kids)] = glob
    return [Gap(loop_id, g, glob) for g, glob in sorted(chosen.items())]


def _inside_items(child: LoopNode, d: Dependence) -> None:
    """Two work-items linked inside one work-item region could only be ordered by a barrier
    inside it, where work-items may have left: refuse."""
    name = child.name
    raise BuildError(f"{d.kind.value} dependence {d.source} -> {d.sink} on '{d.buffer}' links "
                     f"different work-items inside loop '{name}' (a work-item loop or a loop "
                     "under one), where no barrier can order them; move the sequential loops "
                     "that carry it outside the work-item loops")


def barrier_domain(program: Program, path: list[LoopNode], name: str) -> tuple[str, tuple[str, ...]]:
    """The domain of a barrier placed among the children of ``path[-1]``: every iteration of
    the loops of ``path`` that runs some statement below it. Returns (domain text, iterators)."""
    iters = tuple(f"t{k}" for k in range(len(path)))
    region = None
    below = statements_under(path[-1]) if path else []
    for s in below:
        r = prefix_map(program, s, [n.expr(s) for n in path]).range()
        region = r if region is None else _align(region, r).union(_align(r, region))
    assert region is not None
    region = region.coalesce().set_tuple_name(name)
    for k, it in enumerate(iters):
        region = region.set_dim_name(isl.dim_type.set, k, it)
    return printed(region), iters


def group_count(program: Program, node: LoopNode) -> Expr:
    """How many values the loop takes at most (the number of work-groups on its axis), as an
    expression of the size parameters."""
    lo = hi = None
    for s in statements_under(node):
        img = _full(program, node.expr(s)).intersect_domain(
            _align(domain(program, program.statement(s)), _full(program, node.expr(s)))).range()
        a, b = img.dim_min(0), img.dim_max(0)
        lo = a if lo is None else _align(lo, a).min(_align(a, lo))
        hi = b if hi is None else _align(hi, b).max(_align(b, hi))
    assert lo is not None and hi is not None
    ext = _align(hi, lo).sub(_align(lo, hi)).add_constant_val(isl.Val(1)).coalesce()
    return simplify(pw_aff_to_expr(ext, [], f"the extent of loop '{node.name}'",
                                   upper_bound=True))


def at_least(program: Program, value: Expr, limit: Expr) -> bool:
    """Is ``value >= limit`` for every value of the size parameters the program allows (both
    expressions of the parameters only)? Used to see that a work-group loop's bound is the
    grid's size, so that the work-group id needs no guard. False when isl cannot tell.

    >>> from polyloop.ir.program import Program
    >>> from polyloop.ir.expr import Var, VarKind, binop, BinOpKind
    >>> p = Program("p", (), (), ("n",), ())
    >>> n = Var("n", kind=VarKind.PARAM)
    >>> at_least(p, binop(BinOpKind.ADD, n, 1), n), at_least(p, n, binop(BinOpKind.ADD, n, 1))
    (True, False)
    """
    try:
        below = f"{expr_to_isl(value)} < {expr_to_isl(limit)}"
    except NotAffine:
        return False
    cons = " and ".join([f"{p} >= 0" for p in program.params] + [below])
    bad = set_(f"{params_prefix(program.params)}{{ : {cons} }}")
    if program.assumptions:
        bad = bad.intersect(set_(program.assumptions).align_params(bad.get_space()))
    return bool(bad.is_empty())


def loop_start(program: Program, node: LoopNode) -> int | None:
    """The smallest value the loop takes, over all its statements and parameter values, when
    it is a constant (the value that id 0 of a GPU axis stands for)."""
    los = [value_range(program, s, node.expr(s))[0] for s in statements_under(node)]
    return None if not los or None in los else min(los)  # type: ignore[type-var]


def covers(program: Program, node: LoopNode, start: int, count: Expr) -> bool:
    """Do the values ``start .. start + count - 1`` hold every value of the loop, for every
    value of the size parameters? (``count``: an expression of the parameters.)"""
    try:
        top = f"{start} + {expr_to_isl(count)}"
    except NotAffine:
        return False
    for s in statements_under(node):
        m = _full(program, node.expr(s))
        img = m.intersect_domain(_align(domain(program, program.statement(s)), m)).range()
        beyond = set_(f"{params_prefix(program.params)}{{ [v] : v >= {top} }}")
        if not img.intersect(_align(beyond, img)).is_empty():
            return False
    return True


def item_count(program: Program, node: LoopNode) -> int:
    """The number of values of a work-item loop, which must be a constant."""
    los, his = [], []
    for s in statements_under(node):
        lo, hi = value_range(program, s, node.expr(s))
        los.append(lo)
        his.append(hi)
    if None in los or None in his:
        raise BuildError(f"work-item loop '{node.name}' ({node.thread}) has no constant extent; "
                         "split the loop by a constant and bind (or tag l.N) the inner loop")
    return max(his) - min(los) + 1  # type: ignore[type-var,operator]


def loop_upper_bound(program: Program, stmt: str, expr: str) -> Expr:
    """One past the largest value a loop expression takes for ``stmt``, as an expression of
    the size parameters."""
    m = _full(program, expr)
    img = m.intersect_domain(_align(domain(program, program.statement(stmt)), m)).range()
    hi = img.dim_max(0).add_constant_val(isl.Val(1)).coalesce()
    return simplify(pw_aff_to_expr(hi, [], "a loop bound", upper_bound=True))


def loop_extent(program: Program, node: LoopNode) -> Expr | None:
    """One past the largest value of a loop that never goes below 0 (the extent of an array
    indexed by it), as an expression of the size parameters; None when it may be negative."""
    for s in statements_under(node):
        lo, _ = value_range(program, s, node.expr(s))
        if lo is None or lo < 0:
            return None
    hi = None
    for s in statements_under(node):
        m = _full(program, node.expr(s))
        img = m.intersect_domain(_align(domain(program, program.statement(s)), m)).range()
        h = img.dim_max(0)
        hi = h if hi is None else _align(hi, h).max(_align(h, hi))
    assert hi is not None
    return simplify(pw_aff_to_expr(hi.add_constant_val(isl.Val(1)).coalesce(), [],
                                   f"the extent of loop '{node.name}'", upper_bound=True))
