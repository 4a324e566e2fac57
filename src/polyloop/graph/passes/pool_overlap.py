# SPDX-License-Identifier: Apache-2.0
"""A first-layer convolution (any stride) joins the bias, ReLU and max-pool kernel after it
when the pooling's windows overlap or are padded: ResNet's stem (7 x 7 stride-2 convolution,
3 x 3 stride-2 max-pool padded by 1).

``fuse_conv_pool`` fuses a stride-1 convolution with a pooling whose windows tile the image;
what it leaves, a convolution of few input channels (``pool_fusion.SMALL_CHANNELS``) and
constant sizes whose only reader is a ``max_pool2d(relu(conv + bias))`` kernel with a padding
smaller than its stride, becomes one kernel here, scheduled by
``polyloop.ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw``: the pooled rows are computed
right after the convolution rows they need, from the core's cache. The fused kernel keeps the
calls it is made of (conv2d, add, relu, max_pool2d).

``pl.graph.build`` does not run this pass: in a whole ResNet-18 the fused kernel measured no
faster than the two kernels it replaces (its copies of the input, seven shifted rows per
image row, and its row buffer write more memory than the separate pooling reads; see
docs/resnet-stem.md). Apply it to an optimized graph and schedule the kernel it makes with
``conv_overlapping_pool_schedule``.
"""
from __future__ import annotations

from ... import ops
from ...frontend import te
from ...schedule import Schedule
from ..ir import Call, Graph, KernelCall
from ..lower import te_shape
from .merge import merge_into_next
from .pool_fusion import bias_relu_pool, small_conv


def _fits(conv: Call, pool: Call | None) -> bool:
    """Whether the overlapping-pool recipe computes ``pool`` of ``conv``'s chain: a strided
    or stride-1 convolution of few channels, a pooling padded by less than its stride that
    ``fuse_conv_pool`` does not take (windows equal to their strides, no padding, after a
    stride-1 convolution)."""
    if pool is None or not small_conv(conv, any_stride=True):
        return False
    (kh, _), (sh, _), (ph, _) = pool.attr("kernel"), pool.attr("stride"), pool.attr("padding")
    tiling = kh == sh and ph == 0 and conv.attr("stride") == (1, 1)
    return ph < sh and 2 * ph <= kh and not tiling


def fuse_conv_overlapping_pool(g: Graph) -> Graph:
    """Merge each small-channel convolution kernel into the bias + ReLU + max-pool kernel that
    reads it when the pooling is one ``fuse_conv_pool`` leaves (see the module docstring);
    run after ``fuse_conv_pool`` (on the result of ``pl.graph.optimize``).

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 3, 20, 20)); Op = pl.graph.Op
    >>> w = b.constant(np.ones((8, 3, 7, 7), "float32"))
    >>> y = b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, b.emit(Op.CONV2D, x, w, stride=(2, 2),
    ...            padding=(3, 3), dilation=(1, 1), groups=1)), kernel=(3, 3), stride=(2, 2),
    ...            padding=(1, 1))
    >>> kc = fuse_conv_overlapping_pool(pl.graph.optimize(b.build(y))).bindings[0]
    >>> kc.kernel.name, [str(c.op) for c in kc.kernel.body]
    ('f_k0_conv2d_pool', ['conv2d', 'copy', 'relu', 'max_pool2d'])
    """
    def merged_name(first: KernelCall, nxt: KernelCall) -> str | None:
        conv = first.kernel.body[0]
        if len(first.kernel.body) != 1 \
                or not _fits(conv, bias_relu_pool(nxt.kernel.body, conv.outputs[0].name)):
            return None
        return f"{first.kernel.name.removesuffix('_ops')}_pool"
    return merge_into_next(g, merged_name)


def conv_overlapping_pool_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw`` of a kernel that
    ``fuse_conv_overlapping_pool`` made, else None; its arguments are the kernel's (data,
    weight, bias if any, the result)."""
    body = kc.kernel.body
    if len(body) != 4 or not isinstance(body[0], Call) or len(kc.outputs) != 1:
        return None
    conv, first = body[0], body[1]
    pool = bias_relu_pool(body[1:], conv.outputs[0].name)
    if not _fits(conv, pool):
        return None
    env = {x.name: te.placeholder(te_shape(x.type), x.type.dtype, name=x.name)
           for x in kc.kernel.params}
    data, weight = (env[v.name] for v in conv.inputs)
    bias = env[first.inputs[1].name] if len(first.inputs) == 2 else None
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(
        data, weight, bias, conv.attr("padding")[0], conv.attr("stride")[0],
        pool.attr("kernel")[0], pool.attr("stride")[0], pool.attr("padding")[0],
        out_channels=conv.outputs[0].type.shape[1], name=pool.outputs[0].name)
    return ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out)
