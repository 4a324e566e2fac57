# SPDX-License-Identifier: Apache-2.0
"""Merging a one-call kernel into the kernel right after it, the only reader of its result:
what ``fuse_conv_pool`` and ``fold_conv_epilogues`` both do, each with its own test of which
pairs merge."""
from __future__ import annotations

from typing import Callable

from ..ir import Graph, Kernel, KernelCall, uses
from .attention import free_inputs


def merge_into_next(g: Graph, merged_name: Callable[[KernelCall, KernelCall], str | None]
                    ) -> Graph:
    """``g`` with each kernel of one call merged into the kernel call right after it when that
    one is the only reader of the call's result (no output of the graph either) and
    ``merged_name(kernel, next)`` names the merged kernel (None: they stay apart). The merged
    kernel runs the call, then the next kernel's calls, on the inputs neither makes.

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
        if isinstance(prev, KernelCall) and isinstance(b, KernelCall) \
                and len(prev.kernel.body) == 1:
            raw = prev.kernel.body[0].outputs[0].name
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
