# SPDX-License-Identifier: Apache-2.0
"""Kernels of one model that differ only in names (the same layer repeated: a transformer's
blocks, a ResNet's bottlenecks) are generated and compiled once: ``kernel_key`` is a kernel's
text with its values renamed in order of appearance, so equal keys mean equal code up to
names (a kernel reads its weights as arguments, never as literals)."""
from __future__ import annotations

from .ir import Kernel


def kernel_key(k: Kernel) -> str:
    """The structure of ``k``: its operator calls, types and attributes, without its names.

    >>> import polyloop as pl
    >>> from polyloop.graph.passes import fuse_operators
    >>> def relu_exp(name):
    ...     b = pl.graph.GraphBuilder("f"); x = b.input(name, (4, 3))
    ...     g = fuse_operators(b.build(b.emit(pl.graph.Op.EXP, b.emit(pl.graph.Op.RELU, x))))
    ...     return g.bindings[0].kernel
    >>> kernel_key(relu_exp("x")) == kernel_key(relu_exp("y"))
    True
    >>> print(kernel_key(relu_exp("x")))
    v0: float32[4, 3]
    v1: float32[4, 3] = relu(v0; ())
    v2: float32[4, 3] = exp(v1; ())
    -> v2
    """
    names: dict[str, str] = {}

    def name(v) -> str:
        return names.setdefault(v.name, f"v{len(names)}")
    lines = [f"{name(v)}: {v.type}" for v in k.params]
    for c in k.body:
        inputs = ", ".join(name(v) for v in c.inputs)
        outputs = ", ".join(f"{name(v)}: {v.type}" for v in c.outputs)
        lines.append(f"{outputs} = {c.op.value}({inputs}; {c.attrs!r})")
    lines.append("-> " + ", ".join(name(v) for v in k.results))
    return "\n".join(lines)
