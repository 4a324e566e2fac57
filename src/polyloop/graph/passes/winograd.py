# SPDX-License-Identifier: Apache-2.0
"""Which convolutions of a model run as Winograd F(2x2, 3x3) (``polyloop.ops.conv2d_winograd``)
and their weights transformed once, at build time.

A 3 x 3, stride-1, undilated, ungrouped float32 convolution on constant weights, with at least
``MIN_CHANNELS`` input and output channels and an output plane of at least ``MIN_TILES``
2 x 2 tiles (constant sizes). Below these sizes the direct recipe measured faster: on a 7 x 7
plane (16 tiles) the transformed weights (16 / 9 times the direct recipe's) are read from
memory for few tiles each, and ResNet-18's 7 x 7 x 512 layer took 0.88 ms against the direct
recipe's 0.46 ms (2 threads, same run). The weights become the constant ``<weight>_wino``
(``ops.winograd_weight`` in the direct recipe's blocks of output channels) and the call is
marked ``winograd=True``.
"""
from __future__ import annotations

import numpy as np

from ...ops import conv2d_channel_block, winograd_weight
from ..ir import Call, Constant, Op, TensorType, Value

#: fewest input and output channels for which the graph uses Winograd
MIN_CHANNELS = 32
#: fewest 2 x 2 output tiles (a 14 x 14 plane has 49) for which the graph uses Winograd
MIN_TILES = 49


def winograd_conv(call: Call) -> bool:
    """Whether the graph runs this convolution (before its weights are transformed) as
    Winograd F(2x2, 3x3): see the module's rule."""
    if call.op is not Op.CONV2D or call.attr("winograd"):
        return False
    x, w = call.inputs[0].type, call.inputs[1].type
    out = call.outputs[0].type
    if call.attr("stride") != (1, 1) or call.attr("dilation") != (1, 1) \
            or call.attr("groups") != 1 or len(set(call.attr("padding"))) != 1:
        return False
    if x.dtype != "float32" or len(w.shape) != 4 or tuple(w.shape[2:]) != (3, 3):
        return False
    if not all(isinstance(d, int) for d in (*x.shape[1:], *out.shape[1:])):
        return False
    tiles = -(-out.shape[2] // 2) * -(-out.shape[3] // 2)
    return min(x.shape[1], w.shape[0]) >= MIN_CHANNELS and tiles >= MIN_TILES


def winograd_weights(conv: Call, data: dict[str, np.ndarray], new: list[Constant]) -> Call:
    """``conv`` on its weights transformed for Winograd (a constant ``<weight>_wino``, made
    once for weights several layers share), marked ``winograd=True``."""
    weight = conv.inputs[1]
    name = f"{weight.name}_wino"
    made = [c.value for c in new if c.value.name == name]
    if made:
        value = made[0]
    else:
        dtype = weight.type.dtype
        u = winograd_weight(data[weight.name], conv2d_channel_block(dtype))
        value = Value(name, TensorType(u.shape, dtype))
        new.append(Constant(value, u))
    return Call(conv.outputs, conv.op, (conv.inputs[0], value, *conv.inputs[2:]),
                conv.attrs + (("winograd", True),))
