# SPDX-License-Identifier: Apache-2.0
"""A first-layer convolution joins the bias, ReLU and max-pool kernel that follows it.

After ``use_library_kernels`` and ``fuse_into_consumers`` a conv2d + bias + ReLU + max-pool is
two kernels: the convolution alone, writing its full output, then bias, ReLU and the pooling,
reading it back. When the convolution has few input channels (``SMALL_CHANNELS``), stride 1
and constant image sizes, and the pooling's windows are its strides (no padding), the two
become one kernel, scheduled by ``polyloop.ops.schedule_conv2d_bias_relu_maxpool_nchw``: each
pooled row is computed from convolution rows held in registers, and the convolution's output
is never written. The fused kernel keeps the calls it is made of (conv2d, add, relu,
max_pool2d), so that printing the graph shows what it computes.
"""
from __future__ import annotations

from ... import ops
from ...frontend import te
from ...schedule import Schedule
from ..ir import Call, Graph, KernelCall, Op
from ..lower import te_shape
from .merge import merge_into_next

#: convolutions with at most this many input channels are fused with their pooling (with
#: many channels the conv2d recipe's reduction over channels is the better tile)
SMALL_CHANNELS = 4


def small_conv(conv: Call, *, any_stride: bool = False) -> bool:
    """Whether ``conv`` is a convolution (no bias) of few channels and constant sizes, of
    stride 1 unless ``any_stride`` (equal along both axes).

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 3, 16, 16))
    >>> y = b.emit(pl.graph.Op.CONV2D, x, b.constant(np.ones((8, 3, 7, 7), "float32")),
    ...            stride=(2, 2), padding=(3, 3), dilation=(1, 1), groups=1)
    >>> conv = b.build(y).bindings[-1]
    >>> small_conv(conv), small_conv(conv, any_stride=True)
    (False, True)
    """
    if conv.op is not Op.CONV2D or len(conv.inputs) != 2:
        return False
    x, w = (v.type for v in conv.inputs)
    ph, pw = conv.attr("padding")
    sh, sw = conv.attr("stride")
    if sh != sw or (sh != 1 and not any_stride) or conv.attr("dilation") != (1, 1) \
            or conv.attr("groups") != 1 or ph != pw or x.dtype != "float32" \
            or len(x.shape) != 4 or len(w.shape) not in (4, 5):
        return False
    c_in, h, width = x.shape[1:]
    sizes = (c_in, h, width, *w.shape[1:])
    return all(isinstance(d, int) for d in sizes) and c_in <= SMALL_CHANNELS


def bias_relu_pool(body: tuple, raw: str) -> Call | None:
    """The max-pool call of ``body`` when its calls are ``max_pool2d(relu(raw + bias))`` (or
    without the bias), the bias of shape (K, 1, 1) for K channels, square windows; else
    None.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 2, 8, 8)); Op = pl.graph.Op
    >>> y = b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, b.emit(Op.COPY, x)), kernel=(3, 3),
    ...            stride=(2, 2), padding=(1, 1))
    >>> bias_relu_pool(b.build(y).bindings, "x").attr("stride")
    (2, 2)
    """
    if len(body) != 3 or [c.op for c in body[1:]] != [Op.RELU, Op.MAX_POOL2D]:
        return None
    first, relu, pool = body
    if first.inputs[0].name != raw or relu.inputs[0] != first.outputs[0] \
            or pool.inputs[0] != relu.outputs[0]:
        return None
    if first.op is Op.ADD:
        channels = first.inputs[0].type.shape[1]
        if len(first.inputs) != 2 or first.inputs[1].type.shape != (channels, 1, 1):
            return None
    elif first.op is not Op.COPY:
        return None
    (kh, kw), (sh, sw), (ph, pw) = pool.attr("kernel"), pool.attr("stride"), \
        pool.attr("padding")
    return pool if kh == kw and sh == sw and ph == pw else None


def _pool_epilogue(kc: KernelCall, raw: str) -> bool:
    """Whether ``kc`` is ``bias_relu_pool`` with windows equal to their strides and no
    padding."""
    pool = bias_relu_pool(kc.kernel.body, raw)
    return pool is not None and pool.attr("stride") == pool.attr("kernel") \
        and pool.attr("padding") == (0, 0)


def fuse_conv_pool(g: Graph) -> Graph:
    """Merge each small-channel convolution kernel into the bias + ReLU + max-pool kernel that
    reads it (see the module docstring); run after ``fuse_into_consumers``.

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph.build import optimize
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", ("n", 1, 9, 9)); Op = pl.graph.Op
    >>> w = b.constant(np.ones((4, 1, 3, 3), "float32"))
    >>> y = b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, b.emit(Op.CONV2D, x, w, stride=(1, 1),
    ...            padding=(0, 0), dilation=(1, 1), groups=1)), kernel=(2, 2), stride=(2, 2),
    ...            padding=(0, 0))
    >>> [str(c.op) for c in optimize(b.build(y)).bindings[0].kernel.body]
    ['conv2d', 'copy', 'relu', 'max_pool2d']
    """
    def merged_name(first: KernelCall, pool: KernelCall) -> str | None:
        conv = first.kernel.body[0]
        if len(first.kernel.body) != 1 or not (small_conv(conv)
                                               and _pool_epilogue(pool, conv.outputs[0].name)):
            return None
        return f"{first.kernel.name.removesuffix('_ops')}_pool"
    return merge_into_next(g, merged_name)


def conv_pool_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_conv2d_bias_relu_maxpool_nchw`` of a kernel ``fuse_conv_pool`` made,
    else None; its arguments are the kernel's (data, weight, bias if any, the result)."""
    body = kc.kernel.body
    if len(body) != 4 or not small_conv(body[0]) or body[3].op is not Op.MAX_POOL2D:
        return None
    conv, first, _, pool = body
    if pool.attr("stride") != pool.attr("kernel") or pool.attr("padding") != (0, 0):
        return None                 # an overlapping pooling: see pool_overlap
    env = {x.name: te.placeholder(te_shape(x.type), x.type.dtype, name=x.name)
           for x in kc.kernel.params}
    data, weight = (env[v.name] for v in conv.inputs)
    bias = env[first.inputs[1].name] if first.op is Op.ADD else None
    out = ops.conv2d_bias_relu_maxpool_nchw(
        data, weight, bias, conv.attr("padding")[0], pool.attr("kernel")[0],
        out_channels=conv.outputs[0].type.shape[1], name=pool.outputs[0].name)
    return ops.schedule_conv2d_bias_relu_maxpool_nchw(out)
