# SPDX-License-Identifier: Apache-2.0
"""A grouped convolution of few channels per group, stride 1, on a large image runs the
pixel-tile recipe (``polyloop.ops.conv2d_pixels``) instead of the packed register tiles.

The packed recipe's block of output channels (two vectors, or one: ``library.conv_block``)
holds several groups when a group has fewer output channels than the block, and then reads
its weights block-diagonally: of a block of 16 channels holding four groups of 4 (ResNeXt's
first stage), three quarters of the products are with zeros. The pixel tile is a few output
channels of one group by ``X_VECTORS`` vectors of pixels of a row of the padded image, so it
reads only its own group. It pays where the padded image spans several pixel tiles (at least
``MIN_TILES``); on a 7 x 7 image one tile holds the whole plane, and the packed recipe is
faster. Measured on the grouped layers of ResNeXt-50 and RegNetY-400MF (3 x 3, two threads,
AVX-512): 4 channels per group on 56 x 56, 2.6 times faster; 8 per group on 56 x 56 1.4-1.6
times, on 28 x 28 1.1-1.2 times, on 14 x 14 level (left to the packed recipe), on 7 x 7 3.4
times slower. A group of at most half a vector of channels now packs in blocks of half a
vector (``library.conv_block``): 8 per group is then one group per block, no zeros, and the
packed recipe runs it (faster than the pixel tile: 0.15 vs 0.20 ms at 104 on 28 x 28, one
thread); 4 per group (two per block) still runs the pixel tile on a large image.

>>> import numpy as np, polyloop as pl
>>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 32, 28, 28))
>>> w = b.constant(np.ones((32, 4, 3, 3), "float32"))
>>> g = b.build(b.emit(pl.graph.Op.CONV2D, x, w, stride=(1, 1), padding=(1, 1),
...                    dilation=(1, 1), groups=8))
>>> pixel_block(g.bindings[0], 16), pixel_block(g.bindings[0], 4)
(4, None)
"""
from __future__ import annotations

from ...ops.conv_pixels import X_VECTORS
from ...ops.knobs import default_lanes
from ..ir import Call, Op

#: the padded image must span at least this many pixel tiles
MIN_TILES = 4


def _vector_registers(dtype: str) -> int:
    """Vector registers of the host: 32 with 64-byte vectors (AVX-512), else 16."""
    return 32 if default_lanes(dtype) * 4 >= 64 else 16


def pixel_block(call: Call, block: int | None) -> int | None:
    """Output channels per weight block when the graph runs grouped conv2d ``call``, whose
    packed recipe would take blocks of ``block`` channels (``library.conv_block``; None: it
    cannot), with the pixel-tile recipe (see the module docstring), else None: the largest
    divisor of a group's output channels whose tile of ``X_VECTORS`` vectors stays in the
    vector registers."""
    if call.op is not Op.CONV2D or len(call.inputs) < 2 or call.attr("winograd") \
            or call.attr("groups") == 1 or call.attr("stride") != (1, 1) \
            or call.attr("dilation") != (1, 1):
        return None
    x, w = call.inputs[0].type, call.inputs[1].type
    out = call.outputs[0].type
    if x.dtype != "float32" or len(w.shape) != 4 \
            or not all(isinstance(d, int) for d in (*x.shape[1:], *out.shape[1:])):
        return None
    groups = call.attr("groups")
    kg = out.shape[1] // groups
    if w.shape[1] < 2 or block is None or kg >= block:   # depthwise, or no zeros to skip
        return None
    ph, pw = call.attr("padding")
    wp = x.shape[3] + 2 * pw
    span = (out.shape[2] - 1) * wp + out.shape[3]
    if ph < 0 or span < MIN_TILES * X_VECTORS * default_lanes(x.dtype):
        return None
    most = _vector_registers(x.dtype) // X_VECTORS
    return next(b for b in range(min(most, kg), 0, -1) if kg % b == 0)
