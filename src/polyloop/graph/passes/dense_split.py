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

from dataclasses import dataclass

from ... import config, ops
from ...ops.dense_split import MAX_ACCUMULATORS
from ...ops.knobs import default_lanes
from ...frontend import te
from ...schedule import Schedule
from ..ir import KernelCall, Op, Value
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


@dataclass(frozen=True, slots=True)
class SplitDense:
    """A dense layer ``dense_split_k`` runs: its operands, its columns, whether a ReLU
    follows, its slices, whether they run in parallel."""

    x: Value
    weight: Value                   # (K, N), or one panel (1, K, nr) of zero-padded columns
    bias: Value | None
    columns: int
    relu: bool
    slices: int
    parallel: bool


def _layer(body: tuple) -> tuple | None:
    """(x, weight, bias or None, columns, relu) of a kernel that is ``linear`` (weights
    stored (in, out)) then maybe ``relu``, or ``matmul`` on one packed panel (``columns``)
    then maybe the bias ``add`` and ``relu``; else None."""
    dense = body[0]
    tail = [c.op for c in body[1:]]
    if dense.op is Op.LINEAR and dense.attr("transposed") and tail in ([], [Op.RELU]):
        bias = dense.inputs[2] if len(dense.inputs) == 3 else None
        return dense.inputs[0], dense.inputs[1], bias, dense.inputs[1].type.shape[-1], \
            bool(tail)
    if dense.op is not Op.MATMUL or dense.attr("columns") is None \
            or len(dense.inputs[1].type.shape) != 3 or dense.inputs[1].type.shape[0] != 1 \
            or tail not in ([], [Op.ADD], [Op.RELU], [Op.ADD, Op.RELU]):
        return None
    bias = body[1].inputs[1] if tail[:1] == [Op.ADD] else None
    if bias is not None and (body[1].inputs[0] != dense.outputs[0]
                             or len(bias.type.shape) != 1):
        return None
    return dense.inputs[0], dense.inputs[1], bias, dense.attr("columns"), tail[-1:] == [Op.RELU]


def split_dense(kc: KernelCall) -> SplitDense | None:
    """The layer when ``kc`` is a dense layer ``dense_split_k`` runs (see the module
    docstring), else None."""
    layer = _layer(kc.kernel.body)
    if layer is None:
        return None
    x, w, bias, cols, relu = layer
    xt, wt = x.type, w.type
    if len(xt.shape) != 2 or xt.dtype != "float32" or wt.dtype != "float32" \
            or not all(isinstance(d, int) for d in (*xt.shape, *wt.shape)):
        return None
    rows, depth = xt.shape
    lanes = default_lanes("float32")
    slices = _slices(depth)
    if slices >= 2 and depth * cols * 4 >= STREAMED_BYTES \
            and rows * -(-cols // lanes) <= MAX_ACCUMULATORS:
        return SplitDense(x, w, bias, cols, relu, slices, True)
    if cols < NARROW and cols % lanes:
        return SplitDense(x, w, bias, cols, relu, 1, rows * cols * depth >= SERIAL_WORK)
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
    found = split_dense(kc)
    if found is None:
        return None
    env = {v.name: te.placeholder(te_shape(v.type), v.type.dtype, name=v.name)
           for v in kc.kernel.params}
    bias = env[found.bias.name] if found.bias is not None else None
    packed = len(found.weight.type.shape) == 3
    out = ops.dense_split_k(env[found.x.name], env[found.weight.name], bias,
                            splits=found.slices, relu=found.relu, name=kc.outputs[0].name,
                            columns=found.columns if packed else None)
    return ops.schedule_dense_split_k(out, parallel=found.parallel)
