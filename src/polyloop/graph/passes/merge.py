# SPDX-License-Identifier: Apache-2.0
"""Merging a kernel into the kernel right after it, the only reader of its result: what
``fuse_into_consumers``, ``fuse_conv_pool`` and ``fold_conv_epilogues`` do, each with its own
test of which pairs merge; and the parameters of a merged kernel."""
from __future__ import annotations

from typing import Callable

from ..ir import Call, Graph, Kernel, KernelCall, Value, uses


def merge_into_next(g: Graph, merged_name: Callable[[KernelCall, KernelCall], str | None]
                    ) -> Graph:
    """``g`` with each kernel of one result merged into the kernel call right after it when
    that one is the only reader of the result (no output of the graph either) and
    ``merged_name(kernel, next)`` names the merged kernel (None: they stay apart). The merged
    kernel runs the first kernel's calls, then the next one's, on the inputs neither makes.

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph import passes
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2, 8)); Op = pl.graph.Op
    >>> w = b.constant(np.ones((4, 8), "float32"))
    >>> g = b.build(b.emit(Op.SOFTMAX, b.emit(Op.LINEAR, x, w), axis=-1))
    >>> g = passes.use_library_kernels(passes.fuse_operators(g))   # the product, the softmax
    >>> len(g.bindings), len(merge_into_next(g, lambda first, nxt: "both").bindings)
    (2, 1)
    """
    count = uses(g)
    outputs = {v.name for v in g.outputs}
    bindings: list = []
    for b in g.bindings:
        prev = bindings[-1] if bindings else None
        if isinstance(prev, KernelCall) and isinstance(b, KernelCall) and len(prev.outputs) == 1:
            raw = prev.outputs[0].name
            name = merged_name(prev, b) \
                if count.get(raw) == 1 and raw not in outputs else None
            if name is not None:
                body = (*prev.kernel.body, *b.kernel.body)
                params = free_inputs(body)
                bindings[-1] = KernelCall(b.outputs, Kernel(name, params, b.outputs, body),
                                          params)
                continue
        bindings.append(b)
    return g.replace(bindings=tuple(bindings))


def free_inputs(body: tuple[Call, ...]) -> tuple[Value, ...]:
    """The values ``body`` reads and does not make, each once, in order of first use."""
    made = {v.name for c in body for v in c.outputs}
    params: list[Value] = []
    for c in body:
        for v in c.inputs:
            if v.name not in made and v not in params:
                params.append(v)
    return tuple(params)
