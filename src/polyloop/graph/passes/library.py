# SPDX-License-Identifier: Apache-2.0
"""Kernels that ``polyloop.ops`` has a tuned recipe for get a kernel of their own.

``polyloop.ops`` schedules a convolution with any stride (register tiles over packed weights;
a depthwise one, stride 1, row by row) and a 2-D matrix product (register tiles over packed
panels). Such a convolution, or a dense layer with constant weights on a 2-D input, is split
out of its fused kernel: the product alone, then a kernel with the bias and the rest of the
elementwise chain (which ``fuse_into_consumers`` may move into the next pooling or
normalisation). The recipe's speed far outweighs one more pass over the output. A conv2d's
constant weights are packed here, once, in the recipe's blocks of output channels (a 5-D
constant ``<weight>_packed``); a dense layer's, in the matmul recipe's column panels (a 3-D
constant ``<weight>_packed``, the product marked with its ``columns``).
"""
from __future__ import annotations

import numpy as np

from ...ops import (conv2d_channel_block, matmul_panel_width, pack_conv2d_weight,
                    pack_matmul_weight)
from ..ir import Call, Constant, Graph, Kernel, KernelCall, Op, TensorType, Value
from ..schedule import unpacked_dense
from .attention import library_attention, split_attention
from .merge import free_inputs
from .winograd import winograd_conv, winograd_weights


def library_conv(call: Call) -> str | None:
    """``"conv2d"`` or ``"depthwise"`` when ``polyloop.ops`` schedules this convolution."""
    if call.op is not Op.CONV2D or call.attr("dilation") != (1, 1):
        return None
    if call.attr("winograd"):           # weights transformed by winograd_weights
        return "conv2d"
    ph, pw = call.attr("padding")
    sh, sw = call.attr("stride")
    x, w = call.inputs[0].type, call.inputs[1].type
    if ph != pw or sh != sw or x.dtype != "float32" or w.shape[2] != w.shape[3]:
        return None
    groups = call.attr("groups")
    if groups == 1:
        return "conv2d"
    if sh != 1:
        return None
    if groups == x.shape[1] and w.shape[0] == groups and w.shape[1] == 1:
        return "depthwise"
    return None


def library_matmul(call: Call) -> bool:
    """Whether ``polyloop.ops.schedule_matmul`` schedules this call (a 2-D float32 product, or
    one on weights this pass packed: see ``packed_columns``)."""
    dims = (2, 3) if packed_columns(call) is not None else (2, 2)
    return call.op is Op.MATMUL and all(len(v.type.shape) == d and v.type.dtype == "float32"
                                        for v, d in zip(call.inputs, dims))


def packed_columns(call: Call) -> int | None:
    """The columns of a product whose right operand this pass packed into panels
    (``polyloop.ops.matmul_packed``), else None."""
    return call.attr("columns") if call.op is Op.MATMUL else None


def _dense(call: Call) -> bool:
    """A dense layer with constant (transposed) weights on rows of constant count, or on a
    2-D input: ``polyloop.ops.matmul`` of the input viewed as a matrix."""
    x = call.inputs[0].type
    return call.op is Op.LINEAR and bool(call.attr("transposed")) and x.dtype == "float32" \
        and (len(x.shape) == 2 or all(isinstance(d, int) for d in x.shape)) \
        and not (len(x.shape) == 2 and unpacked_dense(x.shape[0], call.inputs[1].type.shape[-1]))


def _as_matrix(v: Value, views: list, made: dict[str, Value] | None = None) -> Value:
    """``v`` viewed as a matrix (leading axes merged): a reshape binding, no copy; one view
    per value (``made``: the views made so far), however many products read it."""
    if len(v.type.shape) == 2:
        return v
    if made is not None and v.name in made:
        return made[v.name]
    rows = int(np.prod(v.type.shape[:-1]))
    m = Value(f"{v.name}_2d", TensorType((rows, v.type.shape[-1]), v.type.dtype))
    views.append(Call((m,), Op.RESHAPE, (v,), (("shape", m.type.shape),)))
    if made is not None:
        made[v.name] = m
    return m


def _packed_weights(conv: Call, data: dict[str, np.ndarray], new: list[Constant],
                    winograd: bool = True) -> Call:
    """A conv2d (dense layer) on constant weights reads them packed in the recipe's blocks of
    output channels (column panels), made here once (``polyloop.ops.pack_conv2d_weight``,
    ``pack_matmul_weight``) instead of on every call; a convolution that ``winograd_conv``
    picks (when ``winograd``), transformed for Winograd."""
    weight = conv.inputs[1]
    dense = conv.op is Op.LINEAR
    if winograd and weight.name in data and winograd_conv(conv):
        return winograd_weights(conv, data, new)
    if weight.name not in data or not (dense or library_conv(conv) == "conv2d"):
        return conv
    made = [c.value for c in new if c.value.name == f"{weight.name}_packed"]
    if made:                         # weights shared by several layers: packed once
        value = made[0]
    else:
        dtype = weight.type.dtype
        packed = pack_matmul_weight(data[weight.name], matmul_panel_width(dtype)) if dense \
            else pack_conv2d_weight(data[weight.name], conv2d_channel_block(dtype))
        # a layer called twice has its weights transposed once per call by fold_constants:
        # equal packed weights are one constant
        same = [c.value for c in new if c.value.name.endswith("_packed")
                and c.data.shape == packed.shape and np.array_equal(c.data, packed)]
        value = same[0] if same else \
            Value(f"{weight.name}_packed", TensorType(packed.shape, dtype))
        if not same:
            new.append(Constant(value, packed))
    return Call(conv.outputs, conv.op, (conv.inputs[0], value, *conv.inputs[2:]), conv.attrs)


def _bias_chw(bias: Value, data: dict[str, np.ndarray], new: list[Constant]) -> Value:
    """A convolution's bias as a (channels, 1, 1) constant, made once however many
    convolutions share the bias (an exporter stores equal biases once)."""
    name = f"{bias.name}_chw"
    made = [c.value for c in new if c.value.name == name]
    if made:
        return made[0]
    b3 = Value(name, TensorType(bias.type.shape + (1, 1), bias.type.dtype))
    new.append(Constant(b3, np.ascontiguousarray(data[bias.name].reshape(-1, 1, 1))))
    return b3


def _columns(dense: Call) -> tuple:
    """The attributes of the product of a dense layer: its ``columns`` when its weights come
    packed (3-D), else none."""
    if len(dense.inputs[1].type.shape) != 3:
        return ()
    return (("columns", dense.outputs[0].type.shape[-1]),)


def _split(kc: KernelCall, data: dict[str, np.ndarray], new: list[Constant],
           winograd: bool = True, made: dict[str, Value] | None = None) -> list:
    conv, rest = kc.kernel.body[0], kc.kernel.body[1:]
    if len(conv.inputs) == 3 and conv.inputs[2].name not in data:
        return [kc]
    conv = _packed_weights(conv, data, new, winograd)
    out = conv.outputs[0]
    raw = Value(f"{out.name}_raw", out.type)
    op = Op.MATMUL if conv.op is Op.LINEAR else conv.op
    attrs = conv.attrs if op is Op.CONV2D else _columns(conv)
    views: list = []
    operands = conv.inputs[:2]
    if op is Op.MATMUL and len(out.type.shape) != 2:
        operands = (_as_matrix(conv.inputs[0], views, made), conv.inputs[1])
        raw2d = _as_matrix(raw, [])
        first = Call((raw2d,), op, operands, attrs)
        views_after = [Call((raw,), Op.RESHAPE, (raw2d,), (("shape", raw.type.shape),))]
    else:
        first = Call((raw,), op, operands, attrs)
        views_after = []
    calls = []
    if len(conv.inputs) == 3 and op is Op.MATMUL:
        calls.append(Call((out,), Op.ADD, (raw, conv.inputs[2])))
    elif len(conv.inputs) == 3:
        calls.append(Call((out,), Op.ADD, (raw, _bias_chw(conv.inputs[2], data, new))))
    else:
        calls.append(Call((out,), Op.COPY, (raw,)))
    calls += rest
    if not rest and len(conv.inputs) == 2 and not views_after:
        return [KernelCall(kc.outputs, Kernel(kc.kernel.name, conv.inputs, kc.outputs,
                                              (Call(conv.outputs, op, conv.inputs,
                                                    first.attrs),)), conv.inputs)]
    k1 = Kernel(f"{kc.kernel.name}_ops", operands, first.outputs, (first,))
    params = free_inputs(tuple(calls))
    k2 = Kernel(f"{kc.kernel.name}_epilogue", params, kc.outputs, tuple(calls))
    return [*views, KernelCall(first.outputs, k1, operands), *views_after,
            KernelCall(kc.outputs, k2, params)]


def use_library_kernels(g: Graph, *, winograd: bool = True) -> Graph:
    """Split each convolution, dense layer and attention ``polyloop.ops`` schedules out of its
    fused kernel (after ``fuse_operators``); ``winograd=False`` keeps every convolution on the
    direct recipe (see ``winograd.winograd_conv``)."""
    data = g.constant_data()
    new: list[Constant] = []
    bindings: list = []
    made: dict[str, Value] = {}
    for b in g.bindings:
        first = b.kernel.body[0] if isinstance(b, KernelCall) else None
        if first is not None and (library_conv(first) is not None or _dense(first)):
            bindings += _split(b, data, new, winograd, made)
        elif first is not None and library_attention(first):
            bindings += split_attention(b)
        else:
            bindings.append(b)
    return g.replace(bindings=tuple(bindings), constants=g.constants + tuple(new))
