# SPDX-License-Identifier: Apache-2.0
"""Kernels that ``polyloop.ops`` has a tuned recipe for get a kernel of their own.

``polyloop.ops`` schedules a convolution with stride 1 (register tiles over packed weights; a
depthwise one row by row). Such a convolution is split out of its fused kernel: the
convolution alone, then a kernel with the bias and the rest of the elementwise chain. The
recipe's speed far outweighs one more pass over the output.
"""
from __future__ import annotations

import numpy as np

from ..ir import Call, Constant, Graph, Kernel, KernelCall, Op, TensorType, Value


def library_conv(call: Call) -> str | None:
    """``"conv2d"`` or ``"depthwise"`` when ``polyloop.ops`` schedules this convolution."""
    if call.op is not Op.CONV2D or call.attr("stride") != (1, 1) \
            or call.attr("dilation") != (1, 1):
        return None
    ph, pw = call.attr("padding")
    x, w = call.inputs[0].type, call.inputs[1].type
    if ph != pw or x.dtype != "float32" or w.shape[2] != w.shape[3]:
        return None
    groups = call.attr("groups")
    if groups == 1:
        return "conv2d"
    if groups == x.shape[1] and w.shape[0] == groups and w.shape[1] == 1:
        return "depthwise"
    return None


def _split(kc: KernelCall, data: dict[str, np.ndarray], new: list[Constant]) -> list:
    conv, rest = kc.kernel.body[0], kc.kernel.body[1:]
    if len(conv.inputs) == 3 and conv.inputs[2].name not in data:
        return [kc]
    out = conv.outputs[0]
    raw = Value(f"{out.name}_raw", out.type)
    first = Call((raw,), Op.CONV2D, conv.inputs[:2], conv.attrs)
    calls = []
    if len(conv.inputs) == 3:
        bias = conv.inputs[2]
        b3 = Value(f"{bias.name}_chw", TensorType(bias.type.shape + (1, 1), bias.type.dtype))
        new.append(Constant(b3, np.ascontiguousarray(data[bias.name].reshape(-1, 1, 1))))
        calls.append(Call((out,), Op.ADD, (raw, b3)))
    else:
        calls.append(Call((out,), Op.COPY, (raw,)))
    calls += rest
    if not rest and len(conv.inputs) == 2:
        return [KernelCall(kc.outputs, Kernel(kc.kernel.name, kc.inputs, kc.outputs, (conv,)),
                           kc.inputs)]
    k1 = Kernel(f"{kc.kernel.name}_ops", conv.inputs[:2], (raw,), (first,))
    made = {v.name for c in calls for v in c.outputs}
    params: list[Value] = []
    for c in calls:
        for v in c.inputs:
            if v.name not in made and v not in params:
                params.append(v)
    k2 = Kernel(f"{kc.kernel.name}_epilogue", tuple(params), kc.outputs, tuple(calls))
    return [KernelCall((raw,), k1, conv.inputs[:2]), KernelCall(kc.outputs, k2, tuple(params))]


def use_library_kernels(g: Graph) -> Graph:
    """Split each convolution ``polyloop.ops`` schedules out of its fused kernel (after
    ``fuse_operators``)."""
    data = g.constant_data()
    new: list[Constant] = []
    bindings: list = []
    for b in g.bindings:
        if isinstance(b, KernelCall) and library_conv(b.kernel.body[0]) is not None:
            bindings += _split(b, data, new)
        else:
            bindings.append(b)
    return g.replace(bindings=tuple(bindings), constants=g.constants + tuple(new))
