# SPDX-License-Identifier: Apache-2.0
"""Attention gets a kernel of its own, scheduled by ``polyloop.ops.schedule_attention``.

Scaled dot-product attention over float32 q, k and v with the same batch axes (batch and
heads) is split out of its fused kernel: the attention alone (register-tiled products per
head, softmax passes along vectors of queries), then a kernel with the elementwise chain that
followed it, if any. Attention of other shapes keeps the general default schedule.
"""
from __future__ import annotations

from ... import ops
from ...frontend import te
from ...schedule import Schedule
from ..ir import Call, Kernel, KernelCall, Op
from ..lower import te_shape
from .merge import free_inputs


def library_attention(call: Call) -> bool:
    """Whether ``polyloop.ops.schedule_attention`` schedules this call: float32 q, k, v of
    shapes ``(..., S, E)``, ``(..., L, E)``, ``(..., L, Ev)`` with the same (at least one)
    leading axes and a constant head size.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); q = b.input("q", ("n", 2, 5, 8))
    >>> y = b.emit(pl.graph.Op.ATTENTION, q, q, q, causal=False, scale=None)
    >>> library_attention(b.build(y).bindings[0])
    True
    """
    if call.op is not Op.ATTENTION or len(call.inputs) != 3:
        return False
    q, k, v = (x.type for x in call.inputs)
    if any(t.dtype != "float32" or len(t.shape) < 3 or len(t.shape) != len(q.shape)
           for t in (q, k, v)):
        return False
    return q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and q.shape[-1] == k.shape[-1] \
        and k.shape[-2] == v.shape[-2] and isinstance(q.shape[-1], int)


def split_attention(kc: KernelCall) -> list[KernelCall]:
    """``kc`` (a kernel whose first call is a library attention) as the attention's kernel,
    then one with the rest of its body."""
    first, rest = kc.kernel.body[0], kc.kernel.body[1:]
    if not rest:
        return [kc]
    operands = free_inputs((first,))
    k1 = Kernel(f"{kc.kernel.name}_ops", operands, first.outputs, (first,))
    params = free_inputs(rest)
    k2 = Kernel(f"{kc.kernel.name}_epilogue", params, kc.outputs, rest)
    return [KernelCall(first.outputs, k1, operands), KernelCall(kc.outputs, k2, params)]


def attention_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_attention`` of a kernel that is one library attention, else None; its
    arguments are the kernel's (q, k, v, then the result)."""
    body = kc.kernel.body
    if len(body) != 1 or not library_attention(body[0]):
        return None
    call = body[0]
    # one placeholder per parameter (self-attention may pass one value as q, k and v), made in
    # the kernel's parameter order: the schedule's arguments are the placeholders in order
    env = {x.name: te.placeholder(te_shape(x.type), x.type.dtype, name=x.name)
           for x in kc.kernel.params}
    q, k, v = (env[x.name] for x in call.inputs)
    scale = call.attr("scale")
    out = ops.attention(q, k, v, scale=None if scale is None else float(scale),
                        causal=bool(call.attr("causal")), name=call.outputs[0].name)
    return ops.schedule_attention(out)
