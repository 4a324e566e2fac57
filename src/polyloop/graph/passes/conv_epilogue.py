# SPDX-License-Identifier: Apache-2.0
"""A library convolution takes the elementwise kernel after it back in: bias, residual add and
activation are applied to each register tile as it is stored (``polyloop.ops.
schedule_conv2d_epilogue``; a depthwise convolution's, to each output row as it is summed:
``schedule_depthwise_conv2d_epilogue``) instead of in a second pass over the whole output.

``use_library_kernels`` splits a convolution out of its fused kernel so that the recipe can
schedule it; ``fuse_into_consumers`` may then move the elementwise rest into a following
pooling. What is left of it, a kernel of elementwise calls of the convolution's shape that is
the only reader of the convolution's result, is folded back here.
"""
from __future__ import annotations

from ... import ops
from ...errors import PolyloopError
from ...frontend import te
from ...schedule import Schedule
from ..ir import INJECTIVE, Call, Graph, KernelCall, Op
from ..lower import te_shape
from ..oplib import LOWERINGS
from .library import library_conv, packed_conv
from .merge import merge_into_next


def _foldable_conv(call: Call) -> bool:
    """Whether ``call`` is a library conv2d on packed weights, or a library depthwise one."""
    kind = library_conv(call)
    return len(call.inputs) == 2 and (
        kind == "depthwise" or kind == "conv2d" and len(call.inputs[1].type.shape) == 5)


def _epilogue_of(conv: Call, kc: KernelCall) -> bool:
    """Whether kernel ``kc`` is an elementwise chain over the convolution's result, every call
    and every other operand of the result's shape or a per-channel ``(K, 1, 1)`` bias."""
    out = conv.outputs[0].type
    bias = (out.shape[1], 1, 1)
    for call in kc.kernel.body:
        if call.op not in INJECTIVE or call.op is Op.BATCH_NORM \
                or any(v.type != out for v in call.outputs):
            return False
        if any(v.type.dtype != out.dtype or v.type.shape not in (out.shape, bias)
               for v in call.inputs):
            return False
    return conv.outputs[0] in kc.inputs and len(kc.outputs) == 1


def fold_conv_epilogues(g: Graph) -> Graph:
    """Merge each elementwise kernel into the library conv2d kernel right before it when it is
    the only reader of the convolution's result (after ``fuse_into_consumers``).

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph.build import optimize
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 3, 8, 8)); Op = pl.graph.Op
    >>> w = b.constant(np.ones((4, 3, 3, 3), "float32"))
    >>> y = b.emit(Op.RELU, b.emit(Op.CONV2D, x, w, stride=(1, 1), padding=(1, 1),
    ...                            dilation=(1, 1), groups=1))
    >>> [str(c.op) for c in optimize(b.build(y)).bindings[0].kernel.body]
    ['conv2d', 'copy', 'relu']
    """
    def merged_name(first: KernelCall, rest: KernelCall) -> str | None:
        conv = first.kernel.body[0]
        if len(first.kernel.body) != 1 or not (_foldable_conv(conv) and _epilogue_of(conv, rest)):
            return None
        return first.kernel.name.removesuffix("_ops")
    return merge_into_next(g, merged_name)


def conv_epilogue_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_conv2d_epilogue`` of a kernel that ``fold_conv_epilogues`` made (a library
    conv2d on packed weights, or a depthwise one, then elementwise calls), else None; its
    arguments are the kernel's parameters, then the result."""
    body = kc.kernel.body
    if len(body) < 2 or len(kc.outputs) != 1 or not isinstance(body[0], Call):
        return None
    conv_call = body[0]
    if not _foldable_conv(conv_call):
        return None
    # one placeholder per parameter, made in the kernel's parameter order: the schedule's
    # arguments are the placeholders in order
    env = {v.name: te.placeholder(te_shape(v.type), v.type.dtype, name=v.name)
           for v in kc.kernel.params}
    x, w = (env[v.name] for v in conv_call.inputs)
    raw = conv_call.outputs[0]
    depthwise = library_conv(conv_call) == "depthwise"
    conv = ops.depthwise_conv2d_nchw(x, w, conv_call.attr("padding"),
                                     stride=conv_call.attr("stride")) if depthwise \
        else packed_conv(conv_call, x, w)
    env[raw.name] = conv
    for call in body[1:]:
        out = call.outputs[0]
        try:
            env[out.name] = LOWERINGS[call.op]([env[v.name] for v in call.inputs],
                                               dict(call.attrs), te_shape(out.type), out.name)
        except PolyloopError as e:
            raise PolyloopError(f"lowering {call.op} '{out.name}' of kernel "
                                f"{kc.kernel.name}: {e}") from None
    if depthwise:
        return ops.schedule_depthwise_conv2d_epilogue(env[kc.outputs[0].name], conv)
    if conv_call.attr("winograd"):
        return ops.schedule_conv2d_winograd(env[kc.outputs[0].name], conv)
    if conv_call.attr("pixels"):
        return ops.schedule_conv2d_pixels(env[kc.outputs[0].name], conv)
    return ops.schedule_conv2d_epilogue(env[kc.outputs[0].name], conv)

