# SPDX-License-Identifier: Apache-2.0
"""A dense layer on a few rows reads its constant weights in panels as wide as its register
tile, packed once at build time.

``dense_schedule`` runs a layer of a few rows (at most ``schedule.UNPACKED_ROWS``, a constant
count) in tiles of one or two rows by up to 16 vectors of columns (``schedule.dense_tile``);
each step of the reduction reads one tile-wide piece of a weight row. On weights as stored
(in, out), consecutive pieces lie a whole weight row apart (16 KB for 4096 columns): every
step of a tile starts a new page, and the hardware prefetcher does not follow such a stream.
Packed in panels of the tile's width (``ops.pack_matmul_weight``), a tile's weights are one
contiguous run, and the layer streams its weights at the memory's pace: one row of
9216 x 4096 (AlexNet's first dense layer) ran 2.8 times faster on two threads, two rows of
4096 x 4096 3.6 times. A layer whose columns fit in one tile keeps its weights as stored
(its one panel would be the stored layout).

>>> panel_columns(1, 4096, 9216, "float32") == 16 * default_lanes("float32")
True
>>> panel_columns(1, 40, 9216, "float32"), panel_columns(64, 4096, 9216, "float32")
(None, None)
>>> panel_columns(3, 40, 40, "float32") is None         # 6.4 KB of weights: as stored
True
"""
from __future__ import annotations

from ... import ops
from ...frontend.te import Tensor
from ...ir.dtypes import as_dtype
from ...ir.expr import Const
from ...ops.knobs import default_lanes
from ...schedule import Schedule
from ..schedule import UNPACKED_ROWS, dense_schedule, dense_tile
from .dense_split import STREAMED_BYTES


def panel_columns(rows: int | str, cols: int | str, depth: int | str, dtype: str
                  ) -> int | None:
    """The panel width (columns) that a dense layer of ``rows`` x ``cols`` results over a
    reduction of ``depth`` (a str: a symbolic size) reads its constant weights in: its
    register tile's columns when it has a constant number of rows, at most ``UNPACKED_ROWS``,
    more columns than one tile and weights of at least ``STREAMED_BYTES`` (smaller ones stay
    in cache: a few KB would only grow by the padding of the last panel); else None (the
    weights stay as stored, or get the matmul recipe's panels)."""
    if not all(isinstance(d, int) for d in (rows, cols, depth)) or rows > UNPACKED_ROWS \
            or depth * cols * as_dtype(dtype).itemsize < STREAMED_BYTES:
        return None
    lanes = default_lanes(dtype)
    width = dense_tile(rows, cols, lanes)[1] * lanes
    return width if cols > width else None


def panel_dense_schedule(x: Tensor, packed: Tensor, columns: int) -> Schedule | None:
    """``dense_schedule`` of ``ops.matmul_packed(x, packed, columns)`` when ``packed``'s panels
    are as wide as the register tile of ``x``'s rows (``panel_columns``), else None."""
    rows, width = x.shape[0], packed.shape[2]
    depth = packed.shape[1]
    if not isinstance(rows, Const) or not isinstance(width, Const) or panel_columns(
            rows.value, columns, depth.value, str(x.dtype)) != width.value:
        return None
    product = ops.matmul_packed(x, packed, columns)
    sch = Schedule(product)
    dense_schedule(sch, product)
    return sch
