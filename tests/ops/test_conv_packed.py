# SPDX-License-Identifier: Apache-2.0
"""conv2d on weights packed ahead of time (polyloop.ops.conv2d_nchw_packed) against PyTorch;
output channels that leave the last block part-empty, NaN-poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

pytest.importorskip("torch", reason="the reference is torch.nn.functional.conv2d (extra 'graph')")

from .test_conv_strided import reference   # noqa: E402 - after the skip


@pytest.mark.parametrize("c, h, w, k, r, pad, stride, lanes, k_vectors",
                         [(5, 9, 11, 33, 3, 1, 1, None, None), (3, 15, 13, 20, 7, 3, 2, 4, 3),
                          (6, 11, 10, 9, 1, 0, 2, 8, 1)])
def test_packed_conv2d_matches_torch(rng, c, h, w, k, r, pad, stride, lanes, k_vectors):
    block = ops.conv2d_channel_block() if lanes is None else lanes * k_vectors
    x = rng.standard_normal((2, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, r), dtype=np.float32)
    packed = ops.pack_conv2d_weight(wt, block)
    assert packed.shape == (-(-k // block), c, r, r, block)
    X = pl.placeholder(x.shape, name="X")
    P = pl.placeholder(packed.shape, name="P")
    conv = ops.conv2d_nchw_packed(X, P, k, pad, stride)
    knobs = {} if lanes is None else dict(lanes=lanes, k_vectors=k_vectors)
    mod = pl.build(ops.schedule_conv2d_nchw(conv, **knobs))
    expected = reference(x, wt, pad, stride)
    out = np.full(expected.shape, np.nan, np.float32)
    mod(x, packed, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_packed_weights_with_the_wrong_block_are_refused():
    X = pl.placeholder((1, 3, 8, 8), name="X")
    P = pl.placeholder((2, 3, 3, 3, 8), name="P")
    with pytest.raises(pl.ScheduleError, match="need 3 blocks of 8"):
        ops.conv2d_nchw_packed(X, P, 20)
    conv = ops.conv2d_nchw_packed(X, P, 16)
    with pytest.raises(pl.ScheduleError, match="packed in blocks of 8 channels"):
        ops.schedule_conv2d_nchw(conv, lanes=4, k_vectors=1)
    with pytest.raises(pl.ScheduleError, match="5-D tensor"):
        ops.conv2d_nchw_packed(X, pl.placeholder((16, 3, 3, 3), name="W"), 16)
    with pytest.raises(pl.ScheduleError, match="4-D array"):
        ops.pack_conv2d_weight(np.zeros((3, 3)), 8)


# the blocks' rows as one parallel loop: three blocks (two threads split one block's rows), a
# part-empty block alone, and one row (a 1 x 1 image: one block, a fused loop of one iteration
# that holds every use of the tile, and three blocks of one row each)
@pytest.mark.parametrize("c, h, w, k", [(6, 9, 7, 45), (5, 13, 10, 24), (11, 1, 1, 28),
                                        (7, 1, 1, 70)])
def test_packed_conv2d_rows_of_blocks_in_parallel(rng, c, h, w, k):
    block = ops.conv2d_channel_block()
    x = rng.standard_normal((1, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 1, 1), dtype=np.float32)
    b = rng.standard_normal((k, 1, 1), dtype=np.float32)
    packed = ops.pack_conv2d_weight(wt, block)
    X, P = pl.placeholder(x.shape, name="X"), pl.placeholder(packed.shape, name="P")
    B = pl.placeholder(b.shape, name="B")
    conv = ops.conv2d_nchw_packed(X, P, k, 0)
    out = pl.compute(conv.shape, lambda n, o, y, z: pl.maximum(conv[n, o, y, z] + B[o, 0, 0], 0.0),
                     name="out")
    sch = ops.schedule_conv2d_epilogue(out, conv)
    assert "k_0_y_fused" in [loop.name for loop in sch.get_loops("conv")]
    expected = np.maximum(reference(x, wt, 0, 1) + b, 0.0)
    got = np.full(expected.shape, np.nan, np.float32)
    pl.build(sch)(x, packed, b, got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
