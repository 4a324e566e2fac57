# SPDX-License-Identifier: Apache-2.0
"""The pixel-tile convolution (polyloop.ops.conv2d_pixels) against PyTorch: plain and grouped
weights, 1 x 1 without padding (the input read in place) and padded 3 x 3 and 1 x 5 windows,
image widths that no tile divides, channel blocks of a group, a symbolic batch, an epilogue
(bias and ReLU) applied per tile, NaN-poisoned outputs; mismatched packing is a clear error."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional.conv2d")


def _reference(x, w, pad, groups):
    with torch.no_grad():
        return torch.nn.functional.conv2d(torch.from_numpy(x).double(),
                                          torch.from_numpy(w).double(), padding=pad,
                                          groups=groups).numpy()


@pytest.mark.parametrize("c, h, w, k, r, s, pad, groups, block, epilogue", [
    (16, 9, 13, 24, 1, 1, (0, 0), 1, 6, False),
    (12, 7, 11, 18, 3, 3, (1, 1), 3, 3, True),
    (8, 6, 19, 8, 1, 5, (0, 2), 4, 2, True),
])
def test_conv_pixels_matches_torch(rng, c, h, w, k, r, s, pad, groups, block, epilogue):
    batch = pl.var("batch")
    x = rng.standard_normal((2, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c // groups, r, s), dtype=np.float32)
    bias = rng.standard_normal((k, 1, 1), dtype=np.float32)
    expected = _reference(x, wt, pad, groups)
    X = pl.placeholder((batch, c, h, w), name="X")
    packed = ops.pack_conv2d_weight(wt, block, groups)
    P = pl.placeholder(packed.shape, name="P")
    conv = ops.conv2d_pixels(X, P, k, pad, groups=groups)
    if epilogue:
        B = pl.placeholder((k, 1, 1), name="B")
        out = pl.compute(conv.shape, lambda n, o, y, xx: pl.maximum(
            conv[n, o, y, xx] + B[o, 0, 0], 0.0), name="out")
        mod = pl.build(ops.schedule_conv2d_pixels(out, conv))
        expected = np.maximum(expected + bias, 0.0)
        res = np.full(expected.shape, np.nan, np.float32)
        mod(x, packed, B=bias, out=res)
    else:
        mod = pl.build(ops.schedule_conv2d_pixels(conv, x_vectors=3))
        res = np.full(expected.shape, np.nan, np.float32)
        mod(x, packed, conv=res)
    np.testing.assert_allclose(res, expected, rtol=1e-4, atol=1e-4)


def test_conv_pixels_whose_last_tile_covers_few_positions(rng):
    """28 x 28 padded by 1: the last tile of a row of the padded image (838 positions, tiles
    of 64 with 16 lanes, 32 with 8) holds 6 positions; its tile buffer is still compacted."""
    x = rng.standard_normal((1, 8, 28, 28), dtype=np.float32)
    wt = rng.standard_normal((8, 4, 3, 3), dtype=np.float32)
    X = pl.placeholder(x.shape, name="X")
    packed = ops.pack_conv2d_weight(wt, 4, 2)
    conv = ops.conv2d_pixels(X, pl.placeholder(packed.shape, name="P"), 8, 1, groups=2)
    res = np.full((1, 8, 28, 28), np.nan, np.float32)
    pl.build(ops.schedule_conv2d_pixels(conv))(x, packed, conv=res)
    np.testing.assert_allclose(res, _reference(x, wt, 1, 2), rtol=1e-4, atol=1e-4)


def test_packing_that_does_not_match_the_groups_is_an_error():
    X = pl.placeholder((1, 8, 9, 9), name="X")
    with pytest.raises(pl.ScheduleError, match="pack_conv2d_weight"):
        ops.conv2d_pixels(X, pl.placeholder((2, 8, 3, 3, 8), name="P"), 16, 1, groups=4)
