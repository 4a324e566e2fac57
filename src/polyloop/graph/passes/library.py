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

from ...ops import (conv2d_channel_block, conv2d_nchw, conv2d_nchw_packed, conv2d_pixels,
                    conv2d_winograd, matmul_panel_width, pack_conv2d_weight, pack_matmul_weight)
from ...ops.conv_packed import group_span
from ..ir import Call, Constant, Graph, Kernel, KernelCall, Op, TensorType, Value
from ..schedule import unpacked_dense
from .attention import library_attention, split_attention
from .dense_panels import panel_columns
from .dense_split import split_dense
from .grouped_pixels import pixel_block
from .merge import free_inputs
from .winograd import winograd_conv, winograd_weights


def library_conv(call: Call) -> str | None:
    """``"conv2d"`` or ``"depthwise"`` when ``polyloop.ops`` schedules this convolution: any
    kernel size, padding, stride and dilation; grouped when a block of output channels of the
    recipe holds whole groups or a group whole blocks (``ops.conv_packed.group_span``); a
    depthwise one (one input and output channel per group), undilated, runs the depthwise
    recipe (a column stride needs constant image sizes)."""
    if call.op is not Op.CONV2D:
        return None
    if call.attr("winograd"):           # weights transformed by winograd_weights
        return "conv2d"
    x, w = call.inputs[0].type, call.inputs[1].type
    groups = call.attr("groups")
    if x.dtype != "float32" or groups == 1:
        return "conv2d" if x.dtype == "float32" else None
    depthwise = groups == x.shape[1] and w.shape[0] == groups and w.shape[1] == 1
    if depthwise and call.attr("dilation") == (1, 1) and (
            call.attr("stride")[1] == 1 or all(isinstance(d, int) for d in x.shape[2:])):
        return "depthwise"
    if isinstance(x.shape[1], int) and conv_block(w.shape[0], groups, w.dtype) is not None:
        return "conv2d"
    return None


def conv_block(out_channels: int, groups: int, dtype: str = "float32") -> int | None:
    """Output channels per packed weight block of a convolution: the recipe's default
    (``ops.conv2d_channel_block``) without groups; with groups, the first of two vectors, one
    vector or (for groups of at most half a vector) half a vector that divides a group, else the
    smallest that holds whole groups (fewest zeros in the block-diagonal blocks), None when
    none does.

    >>> conv_block(64, 1) == conv2d_channel_block()
    True
    >>> block = conv2d_channel_block()
    >>> [conv_block(k, g) * 4 // block for k, g in [(104, 13), (128, 32), (96, 6), (64, 2)]]
    [1, 1, 2, 4]
    """
    block = conv2d_channel_block(dtype)
    if groups == 1:
        return _whole_vectors(out_channels, block)
    kg = out_channels // groups
    # half a vector too for groups of at most that many channels: a block of 16 holding two
    # groups of 8 is half zeros, and with 104 channels (13 groups) its last block is masked
    # (one thread, 3 x 3, 8 per group: 104 on 56 x 56, stride 2, 0.18 vs 1.5 ms; 440 on 7 x 7
    # 0.046 vs 0.24; 4 per group, 256 on 28 x 28, stride 2, 0.11 vs 0.17). Not for larger
    # groups: 16 per group in blocks of 8 ran 30 times slower than in blocks of 16.
    choices = (block, block // 2) + ((block // 4,) if 0 < kg <= block // 4 else ())
    for b in choices:                   # a group spans whole blocks: no zeros
        if kg % b == 0:
            return b
    for b in reversed(choices):         # a block holds whole groups: fewest zeros
        if b % kg == 0 and group_span(out_channels, groups, b) is not None:
            return b
    return None


def _whole_vectors(out_channels: int, block: int) -> int:
    """The default block, or, when the output channels end in half a vector (24, 40, 104 of
    AVX-512's 16 lanes), blocks of three half vectors (fewer when there are fewer): the recipe
    then works in whole half vectors, the last block holding one or two of them. A masked last
    vector can make the C compiler keep every accumulator of the tile in memory (a 1 x 1,
    144 -> 24 convolution on 56 x 56 ran 13 times slower), and five half vectors, where they
    divide the channels, measured slower than three (one thread, AVX-512, 1 x 1: 440 -> 440
    on 7 x 7 0.19 vs 0.41 ms, 120 -> 120 on 28 x 28 0.22 vs 0.31; against the default block's
    masked last vector, 104 -> 104 on 28 x 28 0.19 vs 0.57, 48 -> 104 on 56 x 56 0.44 vs 1.1).

    >>> _whole_vectors(24, 32), _whole_vectors(40, 32), _whole_vectors(64, 32), _whole_vectors(104, 32)
    (24, 24, 32, 24)
    >>> _whole_vectors(8, 32), _whole_vectors(100, 32)      # one half vector; a masked one
    (8, 32)
    """
    lanes = block // 2
    half = lanes // 2
    if out_channels % lanes == 0 or half < 1 or out_channels % half:
        return block
    return half * min(3, out_channels // half)


def packed_conv(call: Call, x, w):
    """The ``polyloop.ops`` tensor of library conv2d ``call`` on placeholders ``x`` and its
    (packed or Winograd) weights ``w``."""
    k_out = call.outputs[0].type.shape[1]
    pad = call.attr("padding")
    if call.attr("winograd"):        # weights made by winograd_weights
        return conv2d_winograd(x, w, k_out, pad[0])
    if call.attr("pixels"):          # weights packed for the pixel tiles (grouped_pixels)
        return conv2d_pixels(x, w, k_out, pad, groups=call.attr("groups"))
    if len(w.shape) == 5:            # weights packed by use_library_kernels
        return conv2d_nchw_packed(x, w, k_out, pad, call.attr("stride"),
                                  dilation=call.attr("dilation"), groups=call.attr("groups"))
    if call.attr("groups") != 1 or call.attr("dilation") != (1, 1):
        return None
    return conv2d_nchw(x, w, pad, call.attr("stride"))


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


def _dense(call: Call, data: dict[str, np.ndarray]) -> bool:
    """A dense layer: a linear layer with constant (transposed) weights, or a matrix product
    whose right operand is a constant matrix (an exported linear layer), on rows of constant
    count or on a 2-D input: ``polyloop.ops.matmul`` of the input viewed as a matrix. Narrow
    layers or few rows of a 2-D input keep their weights as stored (``unpacked_dense``), but
    for a few rows of more columns than one register tile, read in the tile's panels
    (``dense_panels``)."""
    if call.op not in (Op.LINEAR, Op.MATMUL) or len(call.inputs) < 2:
        return False
    x = call.inputs[0].type
    w = call.inputs[1]
    if call.op is Op.LINEAR:
        if not call.attr("transposed"):
            return False
    elif call.op is not Op.MATMUL or w.name not in data or len(w.type.shape) != 2 \
            or len(x.shape) < 2 or call.attr("columns") is not None:
        return False
    if x.dtype != "float32" or not (len(x.shape) == 2
                                    or all(isinstance(d, int) for d in x.shape)):
        return False
    # a product on a >2-D input has no unpacked schedule of its own (dense_schedule is 2-D)
    if len(x.shape) == 2 and unpacked_dense(x.shape[0], w.type.shape[-1]):
        # few rows: constant weights packed in the register tile's panels (dense_panels)
        return w.name in data and panel_columns(x.shape[0], w.type.shape[-1], x.shape[1],
                                                x.dtype) is not None
    return True


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
    dense = conv.op in (Op.LINEAR, Op.MATMUL)
    if winograd and weight.name in data and winograd_conv(conv):
        return winograd_weights(conv, data, new)
    if weight.name not in data or not (dense or library_conv(conv) == "conv2d"):
        return conv
    dtype = weight.type.dtype
    panels = _panel_width(conv, dtype) if dense else None
    block = None if dense else conv_block(conv.outputs[0].type.shape[1], conv.attr("groups"),
                                          dtype)
    pixels = None if dense else pixel_block(conv, block)
    name = f"{weight.name}_packed" if panels is None else f"{weight.name}_panels{panels}"
    if pixels is not None:
        name = f"{weight.name}_pixels{pixels}"
    made = [c.value for c in new if c.value.name == name]
    if made:                         # weights shared by several layers: packed once
        value = made[0]
    else:
        packed = pack_matmul_weight(data[weight.name], panels or matmul_panel_width(dtype)) \
            if dense \
            else pack_conv2d_weight(data[weight.name],
                                    pixels or block,
                                    conv.attr("groups"))
        # a layer called twice has its weights transposed once per call by fold_constants:
        # equal packed weights are one constant
        same = [c.value for c in new if c.value.name.endswith(name[len(weight.name):])
                and c.data.shape == packed.shape and np.array_equal(c.data, packed)]
        value = same[0] if same else Value(name, TensorType(packed.shape, dtype))
        if not same:
            new.append(Constant(value, packed))
    attrs = conv.attrs if pixels is None else conv.attrs + (("pixels", True),)
    return Call(conv.outputs, conv.op, (conv.inputs[0], value, *conv.inputs[2:]), attrs)


def _panel_width(dense: Call, dtype: str) -> int | None:
    """The panels of a dense layer on a few rows (``dense_panels.panel_columns``), else None
    (the matmul recipe's panels)."""
    x = dense.inputs[0].type
    if len(x.shape) != 2:
        return None
    return panel_columns(x.shape[0], dense.outputs[0].type.shape[-1], x.shape[1], dtype)


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
        # a layer that dense_split streams in slices keeps that schedule
        if first is not None and (library_conv(first) is not None or (
                _dense(first, data) and split_dense(b) is None)):
            bindings += _split(b, data, new, winograd, made)
        elif first is not None and library_attention(first):
            bindings += split_attention(b)
        else:
            bindings.append(b)
    return g.replace(bindings=tuple(bindings), constants=g.constants + tuple(new))
