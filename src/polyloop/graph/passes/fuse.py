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


def _chain(bindings: list, start: int, group: list[Call], count: dict[str, int],
           outputs: set[str]) -> int:
    """How many of the calls from ``bindings[start]`` on join ``group``: the longest run of
    consecutive injective calls of the group's result shape, each reading a value the group or
    the run makes, after which every value made in between is read only inside (one value
    leaves the kernel). A value read by several of them (SiLU's ``x * sigmoid(x)``, an erf
    GELU, hardswish) then stays inside the kernel. 0: none joins."""
    if not group:
        return 0
    shape = group[-1].outputs[0].type.shape
    made = {v.name for c in group for v in c.outputs}
    inside: dict[str, int] = {}
    for c in group:
        for v in c.inputs:
            inside[v.name] = inside.get(v.name, 0) + 1
    best = 0
    for n, b in enumerate(bindings[start:], 1):
        if not (isinstance(b, Call) and b.op in INJECTIVE and len(b.outputs) == 1
                and b.outputs[0].type.shape == shape and any(v.name in made for v in b.inputs)):
            break
        for v in b.inputs:
            inside[v.name] = inside.get(v.name, 0) + 1
        made.add(b.outputs[0].name)
        last = b.outputs[0].name
        if all(inside.get(v, 0) == count.get(v, 0) and v not in outputs
               for v in made if v != last):
            best = n
    return best


def fuse_operators(g: Graph) -> Graph:
    """Group operator calls into kernels (see the module docstring).

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (4, 3)); Op = pl.graph.Op
    >>> y = b.emit(Op.RELU, b.emit(Op.SOFTMAX, x, axis=1))
    >>> print(pl.graph.passes.fuse_operators(b.build(y)).bindings[0].kernel.name)
    f_k0_softmax
    >>> s = b.emit(Op.SOFTMAX, x, axis=1)                 # softmax, then SiLU: one kernel
    >>> g = pl.graph.passes.fuse_operators(b.build(b.emit(Op.MUL, s, b.emit(Op.SIGMOID, s))))
    >>> [str(c.op) for c in g.bindings[-1].kernel.body]
    ['softmax', 'sigmoid', 'mul']
    """
    count = uses(g)
    outputs = {v.name for v in g.outputs}
    bindings: list = []
    group: list[Call] = []
    source = list(g.bindings)

    def close() -> None:
        if group:
            k = len([b for b in bindings if isinstance(b, KernelCall)])
            bindings.append(_kernel(f"{g.name}_k{k}_{group[0].op}", group))
            group.clear()
    i = 0
    while i < len(source):
        b = source[i]
        if isinstance(b, Call) and b.op not in VIEWS:
            current = group[-1].outputs[0].name if group else None
            if _joins(b, current, count, outputs):
                group.append(b)
                i += 1
                continue
            n = _chain(source, i, group, count, outputs)
            if n:
                group.extend(source[i:i + n])
                i += n
                continue
            close()
            group.append(b)
            fn = b.attr("fn") if b.op is Op.TE else None
            if hasattr(fn, "library_schedule") and not getattr(fn, "takes_epilogue", False):
                close()        # an int8 product keeps its operator schedule (graph.integer)
        else:
            close()
            bindings.append(b)
        i += 1
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
