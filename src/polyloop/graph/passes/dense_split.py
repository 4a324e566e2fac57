# SPDX-License-Identifier: Apache-2.0
"""Two kinds of dense layer run ``polyloop.ops.dense_split_k``:

- a few rows on large weights: the reduction is split in equal slices between the threads,
  each streaming a contiguous part of the weights (the layer is bound by how fast the weights
  stream in, not by arithmetic). It applies to a constant number of rows small enough for one
  register tile per slice, weights of at least ``STREAMED_BYTES``, and a reduction that the
  slices divide;
- a narrow layer (fewer than ``NARROW`` columns, not whole vectors, e.g. a 10-class output):
  one slice, tiles of rows whose widened rows of partial sums stay in registers (the general
  schedule keeps a part-vector tile in memory, behind masked stores and loads).

The kernel keeps its calls (``linear``, then ``relu`` if any; weights stored (in, out));
only its schedule changes.
"""
from __future__ import annotations

from ... import config, ops
from ...ops.dense_split import MAX_ACCUMULATORS
from ...ops.knobs import default_lanes
from ...frontend import te
from ...schedule import Schedule
from ..ir import KernelCall, Op
from ..lower import te_shape
from ..schedule import SERIAL_WORK

#: weights from this size on are streamed in slices (smaller ones stay in L1/L2 anyway)
STREAMED_BYTES = 256 << 10
#: a layer with fewer columns than this, not whole vectors, is one slice of widened rows
NARROW = 64
# the most slices: beyond a few threads the partial sums cost more than the split saves
_MOST_SLICES = 8


def _slices(depth: int) -> int:
    """Slices of a reduction of ``depth``: the threads (at most ``_MOST_SLICES``), lowered to
    a divisor of ``depth``."""
    threads = min(config.CONFIG.threads, _MOST_SLICES)
    return next(s for s in range(threads, 0, -1) if depth % s == 0)


def _split_dense(kc: KernelCall) -> tuple | None:
    """(the linear call, relu or not, slices, parallel or not) when ``kc`` is such a layer,
    else None."""
    body = kc.kernel.body
    dense = body[0]
    if dense.op is not Op.LINEAR or not dense.attr("transposed") or len(body) > 2 \
            or (len(body) == 2 and (body[1].op is not Op.RELU
                                    or body[1].inputs[0] != dense.outputs[0])):
        return None
    x, w = dense.inputs[0].type, dense.inputs[1].type
    if len(x.shape) != 2 or len(w.shape) != 2 or x.dtype != "float32" or w.dtype != "float32" \
            or not all(isinstance(d, int) for d in (*x.shape, *w.shape)):
        return None
    rows, (depth, cols) = x.shape[0], w.shape
    lanes = default_lanes("float32")
    slices = _slices(depth)
    if slices >= 2 and depth * cols * 4 >= STREAMED_BYTES \
            and rows * -(-cols // lanes) <= MAX_ACCUMULATORS:
        return dense, len(body) == 2, slices, True
    if cols < NARROW and cols % lanes:
        return dense, len(body) == 2, 1, rows * cols * depth >= SERIAL_WORK
    return None


def dense_split_schedule(kc: KernelCall) -> Schedule | None:
    """``ops.schedule_dense_split_k`` of a dense layer that streams its weights (see the
    module docstring), else None; its arguments are the kernel's (x, weights, bias if any,
    the result).

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2, 2048))
    >>> w = b.constant(np.ones((64, 2048), "float32"))
    >>> g = pl.graph.optimize(b.build(b.emit(pl.graph.Op.LINEAR, x, w)))
    >>> sch = dense_split_schedule(g.bindings[0])
    >>> sch is None or "linear_part" in str(sch)     # None on one thread
    True
    """
    found = _split_dense(kc)
    if found is None:
        return None
    dense, relu, slices, parallel = found
    env = {v.name: te.placeholder(te_shape(v.type), v.type.dtype, name=v.name)
           for v in kc.kernel.params}
    x, w, *bias = (env[v.name] for v in dense.inputs)
    out = ops.dense_split_k(x, w, bias[0] if bias else None, splits=slices, relu=relu,
                            name=kc.outputs[0].name)
    return ops.schedule_dense_split_k(out, parallel=parallel)
