# SPDX-License-Identifier: Apache-2.0
"""Calls of C's math library in vectorized loops become the operators they compute.

``pl.extern("expf", header="<math.h>", ...)`` called in a loop marked vectorized is a scalar
call per element: the C compiler has no vector form of ``expf`` (glibc declares one only under
``-ffast-math``), so the loop stayed scalar code. The call computes polyloop's ``exp``, which
has a vector form, so in a vectorized loop it is written as that operator (``as_operator``);
outside vectorized loops the call stays as the user wrote it.

>>> import polyloop as pl
>>> from polyloop.ir.printer import loops_to_str
>>> from polyloop.lower.lower import lower
>>> expf = pl.extern("expf", dtype="float32", args=["float32"], header="<math.h>")
>>> A = pl.placeholder((64,), "float32", name="A")
>>> s = pl.Schedule(pl.compute((64,), lambda i: expf(A[i]), name="B"))
>>> s.vectorize(s.get_loops("B")[0])
>>> print(loops_to_str(lower(s.program, s.state.root).body))
for i in vectorized(64):
    B[i] = exp(A[i])
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.extern import as_operator
from ..ir.loops import For, LoopKind, Node, map_children, map_exprs
from ..ir.traverse import rewrite


def math_calls_as_operators(node: Node) -> Node:
    """``node`` with every math library call inside a vectorized loop written as its
    operator."""
    if isinstance(node, For) and node.kind is LoopKind.VECTORIZED:
        return replace(node, body=map_exprs(node.body, lambda e: rewrite(e, as_operator)))
    return map_children(node, math_calls_as_operators)
