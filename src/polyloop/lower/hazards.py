# SPDX-License-Identifier: Apache-2.0
"""Shapes of generated code that trip known C compiler bugs, so the driver can compile them
conservatively. Found by walking the loop AST; nothing here changes the code."""
from __future__ import annotations

from ..ir.expr import BinOp, BinOpKind, Const, binop, free_vars, loads
from ..ir.loops import Block, For, If, LoopKind, Node, Store
from ..ir.simplify import linear_coefficient, simplify


def negative_stride_reduction(node: Node, loops: tuple[For, ...] = ()) -> bool:
    """Does a reduction read memory backwards along an enclosing loop that the C compiler may
    unroll completely (``P[x - rw]`` inside ``for rw`` of a constant trip count, or an unrolled
    loop), or next to another reduction in the same loop? GCC 12 before 12.3 can vectorize
    such a group of reductions (its SLP vectorizer, negative-step accesses) wrongly at -O3; a
    rectangular perfect nest counts too (unroll-and-jam can make the group). A lone
    reduction over a loop of a size-dependent trip count in no such nest
    (``sum += r[k - i - 1] * y[i]`` over ``i < k``, beside other loops in ``k``) forms no
    such group: it keeps loop vectorization.

    >>> from polyloop.ir.expr import Load, ReduceKind, Var, const
    >>> k, i = Var("k"), Var("i")
    >>> update = Store("s", (const(0),), Load("r", (k - i,), "float64"), ReduceKind.SUM)
    >>> negative_stride_reduction(For("i", const(0), k, update))
    False
    >>> negative_stride_reduction(For("k", const(0), Var("n"), For("i", const(0), k, update)))
    False
    >>> negative_stride_reduction(For("j", const(0), Var("n"), For("i", const(0), k, update)))
    True
    >>> negative_stride_reduction(For("i", const(0), const(3), update))
    True
    """
    if isinstance(node, For):
        return negative_stride_reduction(node.body, loops + (node,))
    if isinstance(node, Block):
        if sum(isinstance(c, Store) and c.reduction is not None for c in node.body) > 1 and any(
                _backwards(c, loops, grouped=True) for c in node.body if isinstance(c, Store)):
            return True
        return any(negative_stride_reduction(c, loops) for c in node.body)
    if isinstance(node, If):
        return negative_stride_reduction(node.then, loops) or (
            node.otherwise is not None and negative_stride_reduction(node.otherwise, loops))
    if isinstance(node, Store):
        return _backwards(node, loops, grouped=_jammable(loops))
    return False


def _jammable(loops: tuple[For, ...]) -> bool:
    """Whether GCC's unroll-and-jam (on at -O3) may put copies of the innermost loop's body for
    several iterations of its parent side by side, a group of reductions: the two loops form a
    perfect nest and the inner bounds do not depend on the outer loop."""
    if len(loops) < 2:
        return False
    outer, inner = loops[-2], loops[-1]
    body = outer.body.body if isinstance(outer.body, Block) else (outer.body,)
    return len(body) == 1 and body[0] is inner and outer.var not in (
        free_vars(inner.start) | free_vars(inner.stop))


def _backwards(s: Store, loops: tuple[For, ...], *, grouped: bool) -> bool:
    """A reduction reading backwards along one of ``loops`` (any of them when ``grouped``,
    else one the compiler may unroll completely)."""
    if s.reduction is None:
        return False
    along = [f.var for f in loops if grouped or _unrollable(f)]
    return any(linear_coefficient(i, v) < 0 for ld in loads(s.value) for i in ld.indices
               for v in along)


def _unrollable(loop: For) -> bool:
    """Whether the C compiler may unroll ``loop`` completely: unrolled by polyloop, or a trip
    count with a constant bound (``3``, ``min(32, n - i0)``)."""
    if loop.kind is LoopKind.UNROLLED:
        return True

    def bounded(stop) -> bool:
        if isinstance(simplify(binop(BinOpKind.SUB, stop, loop.start)), Const):
            return True
        return isinstance(stop, BinOp) and stop.op is BinOpKind.MIN and (
            bounded(stop.lhs) or bounded(stop.rhs))
    return bounded(loop.stop)
