# SPDX-License-Identifier: Apache-2.0
"""A convolution and the elementwise chain after it (bias, residual add, ReLU) in one kernel:
each finished row of a block of output channels goes through the chain while it is in L1, so
the convolution's result is not read back from memory by a second pass. (Applied to each
register tile instead, the chain runs across the tile's transposed store, in scalars: measured
slower than the separate pass.)

``schedule_conv2d_epilogue(out, conv)``: ``conv`` is ``conv2d_nchw`` or ``conv2d_nchw_packed``,
``out`` the end of a chain of elementwise stages of ``conv``'s shape that reads it (and any
other tensors: a bias broadcast over ``(K, 1, 1)``, a residual of the output's shape). The
convolution gets the register tiles of ``schedule_conv2d_nchw`` (same knobs); the stages between
are inlined into ``out``, which is computed on each row of a block of channels right after the
row's tiles are stored (still in L1, in vectors along the row).

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import conv2d_nchw, schedule_conv2d_epilogue
>>> X = pl.placeholder((1, 3, 9, 11), name="X"); Wt = pl.placeholder((5, 3, 3, 3), name="Wt")
>>> B = pl.placeholder((5,), name="B"); conv = conv2d_nchw(X, Wt)
>>> out = pl.compute(conv.shape, lambda n, k, y, x: pl.maximum(conv[n, k, y, x] + B[k], 0.0),
...                  name="out")
>>> mod = pl.build(schedule_conv2d_epilogue(out, conv))
>>> y = mod(np.ones((1, 3, 9, 11), "float32"), np.ones((5, 3, 3, 3), "float32"),
...         np.full(5, -20.0, "float32"))
>>> float(y[0, 0, 0, 0]), float(y[0, 4, 4, 4])
(0.0, 7.0)
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.nodes import Reduce
from ..schedule import Schedule
from .conv import conv_tiles
from .conv_depthwise import depthwise_rows


def epilogue_chain(out: Tensor, conv: Tensor) -> list[Tensor]:
    """The stages from ``conv`` (excluded) to ``out`` (included), producers first; a
    ScheduleError unless every one is an elementwise stage of ``conv``'s shape."""
    who = "schedule_conv2d_epilogue"
    stages: list[Tensor] = []

    def visit(t: Tensor) -> bool:          # whether t reads conv (directly or through stages)
        if t is conv:
            return True
        if t.is_placeholder:
            return False
        reads = [visit(i) for i in t.inputs]
        if any(reads) and t not in stages:
            if isinstance(t.body, Reduce) or t.pieces or t.group is not None \
                    or str(t.shape) != str(conv.shape):
                raise ScheduleError(f"{who}: stage {t.name} between {conv.name} and {out.name} "
                                    f"must be elementwise of shape {conv.shape}; compute it in "
                                    f"its own kernel")
            stages.append(t)
        return any(reads)

    if not isinstance(out, Tensor) or not isinstance(conv, Tensor) or not visit(out):
        raise ScheduleError(f"{who}: {out!r} does not read the convolution {conv!r}")
    return stages


def schedule_conv2d_epilogue(out: Tensor, conv: Tensor, *, lanes: int | None = None,
                             k_vectors: int | None = None, w_block: int | None = None,
                             parallel: str | None = None, c_block: int | None = None,
                             prefetch: int | None = None) -> Schedule:
    """The schedule of ``out``, an elementwise chain over ``conv = conv2d_nchw(...)`` (or
    ``conv2d_nchw_packed``): ``conv`` in the register tiles of ``schedule_conv2d_nchw`` (same
    knobs), the chain applied to each tile as it is stored.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 10, 10), name="X"); W = pl.placeholder((32, 8, 3, 3), name="W")
    >>> from polyloop.ops import conv2d_nchw
    >>> conv = conv2d_nchw(X, W)
    >>> out = pl.compute(conv.shape, lambda n, k, y, x: pl.maximum(conv[n, k, y, x], 0.0),
    ...                  name="relu")
    >>> sch = schedule_conv2d_epilogue(out, conv)
    >>> [loop.name for loop in sch.get_loops("relu")][:2]     # by rows of a channel block
    ['b', 'k_0_y_fused']
    """
    stages = epilogue_chain(out, conv)
    sch = Schedule(out)
    tile, anchor, row = conv_tiles(sch, conv, "schedule_conv2d_epilogue", lanes=lanes,
                              k_vectors=k_vectors, w_block=w_block, parallel=parallel,
                              c_block=c_block, prefetch=prefetch)
    sch.reverse_compute_at(tile, anchor)
    for stage in stages[:-1]:
        sch.compute_inline(stage.name)
    # the chain runs on whole rows of a block of channels, right after their tiles are stored:
    # the rows are still in L1, and the chain's loop is along the output's contiguous axis
    sch.reverse_compute_at(out.name, row)
    sch.vectorize(sch.get_loops(out.name)[-1])
    return sch


def schedule_depthwise_conv2d_epilogue(out: Tensor, dw: Tensor, *, lanes: int | None = None,
                                       x_vectors: int | None = None,
                                       pad_in_channel: bool | None = None,
                                       inline_pad: bool | None = None,
                                       y_rows: int | None = None) -> Schedule:
    """The schedule of ``out``, an elementwise chain over ``dw = depthwise_conv2d_nchw(...)``
    (a bias, an activation): ``dw`` in the rows of ``schedule_depthwise_conv2d_nchw`` (same
    knobs), the chain applied to each output row right after it is summed, in vectors, while
    the row is in L1 (no second pass over the output).

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.ops import depthwise_conv2d_nchw
    >>> X = pl.placeholder((1, 4, 9, 9), name="X"); W = pl.placeholder((4, 1, 3, 3), name="W")
    >>> dw = depthwise_conv2d_nchw(X, W)
    >>> out = pl.compute(dw.shape, lambda n, c, y, x: pl.maximum(dw[n, c, y, x] - 5.0, 0.0),
    ...                  name="out")
    >>> mod = pl.build(schedule_depthwise_conv2d_epilogue(out, dw))
    >>> y = mod(np.ones((1, 4, 9, 9), "float32"), np.ones((4, 1, 3, 3), "float32"))
    >>> float(y[0, 0, 0, 0]), float(y[0, 3, 4, 4])
    (0.0, 4.0)
    """
    stages = epilogue_chain(out, dw)
    sch = Schedule(out)
    sch.compute_inline(dw.name)
    for stage in stages[:-1]:
        sch.compute_inline(stage.name)
    depthwise_rows(sch, out, dw, "schedule_depthwise_conv2d_epilogue", lanes=lanes,
                   x_vectors=x_vectors, pad_in_channel=pad_in_channel, inline_pad=inline_pad,
                   y_rows=y_rows)
    return sch
