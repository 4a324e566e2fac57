# SPDX-License-Identifier: Apache-2.0
"""A first-layer conv + pool kernel, the flatten after it and the dense layer that reads it
become one kernel on a batch of many images, computed with the images along the vectors.

After ``fuse_conv_pool`` a small CNN's head is the fused convolution + bias + ReLU + max-pool
kernel, a flatten (a view) and a dense kernel (``linear``, then ``relu`` if any). On a
constant batch of at least ``MIN_VECTORS`` vectors of images that fills its vectors nearly
whole (``MAX_IDLE_LANES``), the three become one kernel scheduled by
``polyloop.ops.schedule_conv_pool_dense_nchw``: the convolution writes its pooled features
batch last, and the dense layer runs its vectors along the batch, every lane useful, instead
of along its outputs (a hundred outputs are six and a quarter vectors). Its weights are packed
here, once, in row panels (``<weight>_rows``, ``pack_matmul_weight``); the kernel's calls say
what it computes: the conv2d, bias, ReLU and max-pool, the flatten, a ``matmul`` on the
packed weights (``columns``), the bias, the ReLU.
"""
from __future__ import annotations

import numpy as np

from ... import ops
from ...frontend import te
from ...ops.conv_pool_dense import dense_rows
from ...ops.knobs import default_lanes
from ...schedule import Schedule
from ..ir import Call, Constant, Graph, Kernel, KernelCall, Op, TensorType, Value, uses
from ..lower import te_shape
from .merge import free_inputs
from .pool_fusion import small_conv

#: at most this fraction of the lanes of the widened batch idle (a batch of 17 in two
#: vectors of 16 would leave almost half of them idle: the kernels apart are faster there)
MAX_IDLE_LANES = 1 / 8
#: at least this many vectors of images (64 with AVX-512). On one or two vectors (16, 32
#: images) the merged kernel was faster on a quiet machine (1.2x - 1.5x), but its two threads
#: scaled poorly while other processes ran, and it was then slower than the kernels apart
#: (0.65x - 0.7x); on four vectors it stayed at least even with them
MIN_VECTORS = 4


def _batch_fits(batch: object) -> bool:
    lanes = default_lanes("float32")
    if not isinstance(batch, int):
        return False
    wide = -(-batch // lanes) * lanes
    return wide >= MIN_VECTORS * lanes and wide - batch <= MAX_IDLE_LANES * wide


def _conv_pool_parts(body: tuple[Call, ...]) -> tuple[Call, Value | None, Call] | None:
    """(conv2d, its bias or None, max_pool2d) when ``body`` starts as a kernel
    ``fuse_conv_pool`` made (conv2d, add or copy, relu, max_pool2d), else None."""
    if len(body) < 4 or not small_conv(body[0]) or body[3].op is not Op.MAX_POOL2D \
            or body[1].op not in (Op.ADD, Op.COPY) or body[2].op is not Op.RELU:
        return None
    (kh, kw), stride = body[3].attr("kernel"), body[3].attr("stride")
    if kh != kw or stride != (kh, kw) or body[3].attr("padding") != (0, 0):
        return None
    return body[0], body[1].inputs[1] if body[1].op is Op.ADD else None, body[3]


def _flattens(pooled: Value, flat: Value) -> bool:
    """Whether ``flat`` is ``pooled`` (B, K, H, W) flattened to (B, K * H * W)."""
    shape = pooled.type.shape
    return len(shape) == 4 and all(isinstance(d, int) for d in shape) \
        and flat.type.shape == (shape[0], shape[1] * shape[2] * shape[3])


def _dense_kernel(kc: object, flat: Value, data: dict[str, np.ndarray]) -> Call | None:
    """The linear call of ``kc`` when it is a dense layer (+ ReLU) on ``flat`` with constant
    weights stored (in, out), else None."""
    if not isinstance(kc, KernelCall):
        return None
    body = kc.kernel.body
    dense = body[0]
    if dense.op is not Op.LINEAR or not dense.attr("transposed") or dense.inputs[0] != flat \
            or dense.inputs[1].name not in data or len(body) > 2 \
            or (len(body) == 2 and (body[1].op is not Op.RELU
                                    or body[1].inputs[0] != dense.outputs[0])):
        return None
    if len(dense.inputs) == 3 and len(dense.inputs[2].type.shape) != 1:
        return None
    return dense if dense.inputs[1].type.dtype == "float32" else None


def _head(conv_pool: KernelCall, view: Call, dense_kc: KernelCall, dense: Call,
          data: dict[str, np.ndarray], new: list[Constant]) -> KernelCall:
    """The merged kernel (see the module docstring)."""
    flat = view.outputs[0]
    batch, columns = dense.outputs[0].type.shape
    weight = dense.inputs[1]
    rows = dense_rows(batch)
    packed = ops.pack_matmul_weight(data[weight.name], rows)
    value = Value(f"{weight.name}_rows", TensorType(packed.shape, weight.type.dtype))
    if all(c.value.name != value.name for c in new):
        new.append(Constant(value, packed))
    out = dense.outputs[0]
    raw = Value(f"{out.name}_raw", out.type) if len(dense.inputs) == 3 else out
    calls = [Call((raw,), Op.MATMUL, (flat, value), (("columns", columns),))]
    if len(dense.inputs) == 3:
        calls.append(Call((out,), Op.ADD, (raw, dense.inputs[2])))
    body = (*conv_pool.kernel.body, view, *calls, *dense_kc.kernel.body[1:])
    params = free_inputs(body)
    name = f"{conv_pool.kernel.name}_linear"
    return KernelCall(dense_kc.outputs, Kernel(name, params, dense_kc.outputs, body), params)


def fuse_conv_pool_dense(g: Graph) -> Graph:
    """Merge each conv + pool kernel, the flatten of its result and the dense kernel reading
    it into one kernel (see the module docstring); run after ``fuse_conv_pool``.

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph.build import optimize
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (64, 1, 8, 8)); Op = pl.graph.Op
    >>> w = b.constant(np.ones((4, 1, 3, 3), "float32"))
    >>> y = b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, b.emit(Op.CONV2D, x, w, stride=(1, 1),
    ...            padding=(0, 0), dilation=(1, 1), groups=1)), kernel=(2, 2), stride=(2, 2),
    ...            padding=(0, 0))
    >>> y = b.emit(Op.LINEAR, b.emit(Op.RESHAPE, y, shape=(64, 36)),
    ...            b.constant(np.ones((10, 36), "float32")))
    >>> [str(c.op) for c in optimize(b.build(y)).bindings[0].kernel.body][3:]
    ['max_pool2d', 'reshape', 'matmul']
    """
    data = g.constant_data()
    count = uses(g)
    outputs = {v.name for v in g.outputs}
    new: list[Constant] = []
    bindings = list(g.bindings)
    merged: list = []
    k = 0
    while k < len(bindings):
        b = bindings[k]
        if isinstance(b, KernelCall) and len(b.kernel.body) == 4 \
                and _conv_pool_parts(b.kernel.body) is not None and k + 2 < len(bindings):
            view, nxt = bindings[k + 1], bindings[k + 2]
            pooled = b.outputs[0] if len(b.outputs) == 1 else None
            if pooled is not None and isinstance(view, Call) and view.op is Op.RESHAPE \
                    and view.inputs[0] == pooled and _flattens(pooled, view.outputs[0]) \
                    and count.get(pooled.name) == 1 and pooled.name not in outputs \
                    and count.get(view.outputs[0].name) == 1 \
                    and view.outputs[0].name not in outputs \
                    and _batch_fits(view.outputs[0].type.shape[0]):
                dense = _dense_kernel(nxt, view.outputs[0], data)
                if dense is not None:
                    merged.append(_head(b, view, nxt, dense, data, new))
                    k += 3
                    continue
        merged.append(b)
        k += 1
    return g.replace(bindings=tuple(merged), constants=g.constants + tuple(new))


def conv_pool_dense_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_conv_pool_dense_nchw`` of a kernel ``fuse_conv_pool_dense`` made, else
    None; its arguments are the kernel's parameters, then the result."""
    body = kc.kernel.body
    parts = _conv_pool_parts(body)
    if parts is None or len(body) < 6 or body[4].op is not Op.RESHAPE \
            or body[5].op is not Op.MATMUL or body[5].attr("columns") is None \
            or [c.op for c in body[6:]] not in ([], [Op.ADD], [Op.RELU], [Op.ADD, Op.RELU]):
        return None
    conv, bias, pool = parts
    tail = body[6:]
    dense_bias = tail[0].inputs[1] if tail and tail[0].op is Op.ADD else None
    relu = bool(tail) and tail[-1].op is Op.RELU
    env = {v.name: te.placeholder(te_shape(v.type), v.type.dtype, name=v.name)
           for v in kc.kernel.params}
    out = ops.conv_pool_dense_nchw(
        env[conv.inputs[0].name], env[conv.inputs[1].name],
        env[bias.name] if bias is not None else None, env[body[5].inputs[1].name],
        env[dense_bias.name] if dense_bias is not None else None,
        columns=body[5].attr("columns"), pad=conv.attr("padding")[0],
        pool=pool.attr("kernel")[0], relu=relu,
        out_channels=conv.outputs[0].type.shape[1], name=kc.outputs[0].name)
    return ops.schedule_conv_pool_dense_nchw(out)
