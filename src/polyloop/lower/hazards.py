# SPDX-License-Identifier: Apache-2.0
"""Shapes of generated code that trip known C compiler bugs, so the driver can compile them
conservatively. Found by walking the loop AST; nothing here changes the code."""
from __future__ import annotations

from ..ir.expr import Load, loads
from ..ir.loops import Block, For, If, Node, Store
from ..ir.simplify import linear_coefficient


def negative_stride_reduction(node: Node, loops: tuple[str, ...] = ()) -> bool:
    """Does a reduction read memory backwards along an enclosing loop (``P[x - rw]`` inside
    ``for rw``)? GCC 12 before 12.3 can vectorize such a reduction wrongly at -O3 (tree
    vectorizer, negative-step accesses in a reduction)."""
    if isinstance(node, For):
        return negative_stride_reduction(node.body, loops + (node.var,))
    if isinstance(node, Block):
        return any(negative_stride_reduction(c, loops) for c in node.body)
    if isinstance(node, If):
        return negative_stride_reduction(node.then, loops) or (
            node.otherwise is not None and negative_stride_reduction(node.otherwise, loops))
    if isinstance(node, Store) and node.reduction is not None:
        return any(_backwards(ld, loops) for ld in loads(node.value))
    return False


def _backwards(ld: Load, loops: tuple[str, ...]) -> bool:
    return any(linear_coefficient(i, v) < 0 for i in ld.indices for v in loops)

