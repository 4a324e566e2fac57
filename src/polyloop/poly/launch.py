# SPDX-License-Identifier: Apache-2.0
"""The launches a GPU target makes of a loop tree, answered exactly with isl: which shapes of
bound loops a launch can run (``shape_problem``), and how many work-groups and work-items it
needs (``group_count``, ``item_count``) and where their ids start.

A top-level nest is one launch. Its work-group loops (``blockIdx.*``) are enumerated by the
hardware all at once, so they must be the outermost loops of the nest and enclose all of it;
its work-item loops (``threadIdx.*``) are the work-items of a group, whose number is fixed when
the kernel is compiled, so each must have a constant extent.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import islpy as isl

from ..errors import BuildError
from ..ir.expr import Expr
from ..ir.program import Program
from ..ir.simplify import simplify
from .affine import value_range
from .gpu import is_group, is_item
from .isl_util import NotAffine, expr_to_isl, map_in, params_prefix, set_, with_params
from .regions import pw_aff_to_expr
from .tree import LoopNode, Root, statements_under


def _align(a, b):
    return a.align_params(b.get_space())


@dataclass(frozen=True, slots=True)
class ShapeProblem:
    """A bound loop that no launch can run: the loop, the rule it breaks and the fix."""
    loop: LoopNode
    rule: str
    fix: str

    def describe(self) -> str:
        return f"{self.rule}; {self.fix}"


def shape_problem(program: Program, root: Root) -> ShapeProblem | None:
    """The first bound loop of ``root`` that a GPU launch cannot run, or None.

    >>> from polyloop.ir.program import Program
    >>> shape_problem(Program("p", (), (), ("n",), ()), Root(())) is None
    True
    """
    for top in root.children:
        if isinstance(top, LoopNode):
            found = (_axis_problem(top, {}) or _group_problem(top, [])
                     or _item_problem(program, top))
            if found is not None:
                return found
    return None


def _axis_problem(node: LoopNode, above: dict) -> ShapeProblem | None:
    """One GPU index runs one loop: no two nested loops are bound to the same axis."""
    if node.thread is not None:
        outer = above.get(node.thread)
        if outer is not None:
            return ShapeProblem(
                node, f"loop '{node.name}' would be bound to {node.thread}, which loop "
                f"'{outer.name}' around it already runs on, but each GPU index runs one loop "
                "of a nest",
                f"bind '{node.name}' to another axis of the same kind (.y or .z)")
        above = above | {node.thread: node}
    for c in node.children:
        if isinstance(c, LoopNode):
            found = _axis_problem(c, above)
            if found is not None:
                return found
    return None


def _group_problem(node: LoopNode, above: list[LoopNode]) -> ShapeProblem | None:
    """Work-group loops: every loop above one is a work-group loop whose only child is the
    next loop down (the hardware runs all work-groups at once, around the whole nest)."""
    if is_group(node):
        host = next((a for a in above if not is_group(a)), None)
        if host is not None:
            return ShapeProblem(
                node, f"work-group loop '{node.name}' ({node.thread}) would run inside loop "
                f"'{host.name}', which is not a work-group loop, but the work-groups of a launch "
                "run all at once, around the whole nest",
                f"bind '{host.name}' to a work-group axis (blockIdx.*, tag g.N) first, or "
                f"reorder so that '{node.name}' is outermost")
        wide = next((a for a in above if len(a.children) > 1), None)
        if wide is not None:
            return ShapeProblem(
                node, f"work-group loop '{node.name}' ({node.thread}) would run below loop "
                f"'{wide.name}', which holds several loops or statements, but the work-groups "
                "of a launch must enclose the whole nest",
                f"bind a loop above '{wide.name}' instead, or move the other blocks out of "
                f"'{wide.name}'")
    for c in node.children:
        if isinstance(c, LoopNode):
            found = _group_problem(c, above + [node])
            if found is not None:
                return found
    return None


def _item_problem(program: Program, top: LoopNode) -> ShapeProblem | None:
    """Work-item loops: a constant number of values (the group size is compiled in)."""
    for n in _loops(top):
        if is_item(n) and _item_range(program, n) is None:
            return ShapeProblem(
                n, f"work-item loop '{n.name}' ({n.thread}) has no constant extent, but the "
                "number of work-items of a group is fixed when the kernel is compiled",
                f"split '{n.name}' by a constant and bind the inner loop (tag it l.N)")
    return None


def _loops(n: LoopNode):
    yield n
    for c in n.children:
        if isinstance(c, LoopNode):
            yield from _loops(c)


def _item_range(program: Program, node: LoopNode) -> tuple[int, int] | None:
    """The smallest and largest value of a loop over all its statements, when constant."""
    los, his = [], []
    for s in statements_under(node):
        lo, hi = value_range(program, s, node.expr(s))
        if lo is None or hi is None:
            return None
        los.append(lo)
        his.append(hi)
    return (min(los), max(his)) if los else None


def loop_image(program: Program, node: LoopNode) -> isl.Set:
    """``{ [v] }``: every value the loop takes, over all its statements (remembered by the
    statements' domains and expressions: the launch's sizes, its hardware loops and the
    extents of arrays indexed by the loop all ask)."""
    return _image(tuple(program.params), tuple(
        (program.statement(s).domain, node.expr(s)) for s in statements_under(node)))


@lru_cache(maxsize=4096)
def _image(params: tuple[str, ...], parts: tuple[tuple[str, str], ...]) -> isl.Set:
    img = None
    for domain_text, expr in parts:
        m = map_in(params, expr)
        d = set_(with_params(params, domain_text))
        r = m.intersect_domain(_align(d, m)).range()
        img = r if img is None else _align(img, r).union(_align(r, img))
    assert img is not None
    return img.coalesce()


def group_count(program: Program, node: LoopNode) -> Expr:
    """How many values the loop takes at most (the number of work-groups on its axis), as an
    expression of the size parameters."""
    img = loop_image(program, node)
    lo, hi = img.dim_min(0), img.dim_max(0)
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
    img = loop_image(program, node)
    beyond = set_(f"{params_prefix(program.params)}{{ [v] : v >= {top} }}")
    return bool(img.intersect(_align(beyond, img)).is_empty())


def item_count(program: Program, node: LoopNode) -> int:
    """The number of values of a work-item loop, which must be a constant (``shape_problem``
    says so for every accepted schedule)."""
    got = _item_range(program, node)
    if got is None:
        raise BuildError(_item_problem(program, node).describe())  # type: ignore[union-attr]
    return got[1] - got[0] + 1


def loop_upper_bound(program: Program, stmt: str, expr: str) -> Expr:
    """One past the largest value a loop expression takes for ``stmt``, as an expression of
    the size parameters. Remembered by (parameters, domain text, expression): a prefetch asks
    it for the same loops several times (``clear_caches`` forgets)."""
    return _upper_bound(tuple(program.params), program.statement(stmt).domain, expr)


@lru_cache(maxsize=4096)
def _upper_bound(params: tuple[str, ...], domain_text: str, expr: str) -> Expr:
    m = map_in(params, expr)
    dom = set_(with_params(params, domain_text))
    img = m.intersect_domain(_align(dom, m)).range()
    hi = img.dim_max(0).add_constant_val(isl.Val(1)).coalesce()
    return simplify(pw_aff_to_expr(hi, [], "a loop bound", upper_bound=True))


def loop_extent(program: Program, node: LoopNode) -> Expr | None:
    """One past the largest value of a loop that never goes below 0 (the extent of an array
    indexed by it), as an expression of the size parameters; None when it may be negative."""
    for s in statements_under(node):
        lo, _ = value_range(program, s, node.expr(s))
        if lo is None or lo < 0:
            return None
    hi = loop_image(program, node).dim_max(0)
    return simplify(pw_aff_to_expr(hi.add_constant_val(isl.Val(1)).coalesce(), [],
                                   f"the extent of loop '{node.name}'", upper_bound=True))


def clear_caches() -> None:
    """Forget remembered loop bounds (for timing code generation from scratch)."""
    _upper_bound.cache_clear()
    _image.cache_clear()
