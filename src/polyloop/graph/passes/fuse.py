# SPDX-License-Identifier: Apache-2.0
"""Operator fusion: each elementwise/broadcast chain joins the kernel of the call it follows.

A group starts at any operator call (a reduction such as conv2d or linear, or an injective one);
an injective call whose first operand of the result's shape is the group's current result, read
nowhere else, is appended to the group (conv+bias+relu, dense+add+gelu, conv+bn+add+relu).
Views (reshape) and extern calls stay outside kernels. Each group becomes a ``Kernel`` called
with ``KernelCall``.
"""
from __future__ import annotations

from ..ir import INJECTIVE, VIEWS, Call, Graph, Kernel, KernelCall, Op, uses
from .merge import merge_into_next

# Consumers that read each element of their input a bounded number of times: an elementwise
# kernel feeding one of them is computed inside it, at each read (exact, no recomputation
# beyond overlapping windows), and its result is never written to memory.
_READ_FEW_TIMES = frozenset({Op.MAX_POOL2D, Op.AVG_POOL2D, Op.ADAPTIVE_AVG_POOL2D,
                             Op.SOFTMAX, Op.LOG_SOFTMAX, Op.LAYER_NORM, Op.MEAN})


def _joins(call: Call, current: str | None, count: dict[str, int], outputs: set[str]) -> bool:
    if current is None or call.op not in INJECTIVE:
        return False
    if count.get(current, 0) != 1 or current in outputs:
        return False
    return any(v.name == current and v.type.shape == call.outputs[0].type.shape
               for v in call.inputs)


def _kernel(name: str, body: list[Call]) -> KernelCall:
    made = {v.name for c in body for v in c.outputs}
    params = []
    for c in body:
        for v in c.inputs:
            if v.name not in made and v not in params:
                params.append(v)
    results = body[-1].outputs
    return KernelCall(results, Kernel(name, tuple(params), results, tuple(body)), tuple(params))


def fuse_operators(g: Graph) -> Graph:
    """Group operator calls into kernels (see the module docstring).

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (4, 3)); Op = pl.graph.Op
    >>> y = b.emit(Op.RELU, b.emit(Op.SOFTMAX, x, axis=1))
    >>> print(pl.graph.passes.fuse_operators(b.build(y)).bindings[0].kernel.name)
    f_k0_softmax
    """
    count = uses(g)
    outputs = {v.name for v in g.outputs}
    bindings: list = []
    group: list[Call] = []

    def close() -> None:
        if group:
            k = len([b for b in bindings if isinstance(b, KernelCall)])
            bindings.append(_kernel(f"{g.name}_k{k}_{group[0].op}", group))
            group.clear()
    for b in g.bindings:
        if isinstance(b, Call) and b.op not in VIEWS:
            current = group[-1].outputs[0].name if group else None
            if not _joins(b, current, count, outputs):
                close()
            group.append(b)
        else:
            close()
            bindings.append(b)
    close()
    return g.replace(bindings=tuple(bindings))


def fuse_into_consumers(g: Graph) -> Graph:
    """Merge a kernel of elementwise calls into the next kernel when that kernel's first call
    reads its result, is a pooling or normalisation (see ``_READ_FEW_TIMES``) and nothing
    else reads it: conv + bias + relu into the following max-pool.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 2, 4, 4)); Op = pl.graph.Op
    >>> y = b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, x), kernel=(2, 2), stride=(2, 2),
    ...            padding=(0, 0))
    >>> g = fuse_into_consumers(fuse_operators(b.build(y)))
    >>> [str(c.op) for c in g.bindings[0].kernel.body]
    ['relu', 'max_pool2d']
    """
    def merged_name(first: KernelCall, consumer: KernelCall) -> str | None:
        head = consumer.kernel.body[0]
        if all(c.op in INJECTIVE for c in first.kernel.body) and head.op in _READ_FEW_TIMES \
                and first.outputs[0] in head.inputs:
            return consumer.kernel.name
        return None
    return merge_into_next(g, merged_name)
