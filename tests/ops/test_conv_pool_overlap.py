# SPDX-License-Identifier: Apache-2.0
"""conv2d (any stride) + bias + ReLU + a max-pool whose windows overlap or are padded, as one
operator (polyloop.ops.conv2d_bias_relu_maxpool_overlap_nchw), against PyTorch: ResNet's stem
shape on odd image sizes, channel counts off the tile, stride 1 and 2, pools 3/2/1, 3/2/0 and
2/2/1, packed weights, no bias, a symbolic batch, NaN-poisoned outputs; refusals."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional (extra 'graph')")


def reference(x, w, b, pad, stride, pool, pool_stride, pool_pad):
    F = torch.nn.functional
    with torch.no_grad():
        y = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                     None if b is None else torch.from_numpy(b).double(), padding=pad,
                     stride=stride)
        return F.max_pool2d(torch.relu(y), pool, pool_stride, pool_pad).numpy()


def run(mod, args, shape):
    out = np.full(shape, np.nan, np.float32)
    mod(*args, out)
    return out


# (n, c, h, w, k, r, pad, stride, pool, pool_stride, pool_pad, lanes, k_tile)
CASES = [(1, 3, 37, 41, 20, 7, 3, 2, 3, 2, 1, None, 8),     # ResNet's stem, odd sizes
         (2, 3, 30, 29, 12, 7, 3, 2, 3, 2, 1, 8, 5),        # k_tile not dividing: 4
         (2, 2, 19, 23, 10, 3, 1, 1, 3, 2, 1, 4, 3),        # stride-1 convolution
         (1, 1, 21, 20, 6, 3, 0, 2, 3, 2, 0, 8, 6),         # pool without padding
         (1, 4, 17, 18, 7, 5, 2, 2, 2, 2, 1, 4, 7)]         # window = stride, padded


@pytest.mark.parametrize("n, c, h, w, k, r, pad, stride, pool, ps, pp, lanes, k_tile", CASES)
def test_conv_overlapping_pool_matches_torch(rng, n, c, h, w, k, r, pad, stride, pool, ps, pp,
                                             lanes, k_tile):
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, r), dtype=np.float32)
    b = rng.standard_normal(k, dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B = pl.placeholder(b.shape, name="B")
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(X, W, B, pad, stride, pool, ps, pp,
                                                    lanes=lanes)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, k_tile=k_tile,
                                                                      lanes=lanes))
    expected = reference(x, wt, b, pad, stride, pool, ps, pp)
    assert tuple(d.value for d in out.shape) == expected.shape
    np.testing.assert_allclose(run(mod, (x, wt, b), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 2])
def test_packed_weights_chw_bias_and_symbolic_batch(rng, batch):
    wt = rng.standard_normal((24, 3, 7, 7), dtype=np.float32)
    b = rng.standard_normal(24, dtype=np.float32)
    packed = ops.pack_conv2d_weight(wt, 16)
    X = pl.placeholder((pl.var("n"), 3, 33, 35), name="X")
    P, B = pl.placeholder(packed.shape, name="P"), pl.placeholder((24, 1, 1), name="B")
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(X, P, B, pad=3, stride=2, out_channels=24)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out))
    x = rng.standard_normal((batch, 3, 33, 35), dtype=np.float32)
    expected = reference(x, wt, b, 3, 2, 3, 2, 1)
    got = run(mod, (x, packed, b.reshape(24, 1, 1)), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_without_bias_serial_and_the_tile_in_registers(rng):
    x = rng.standard_normal((1, 3, 26, 27), dtype=np.float32)
    wt = rng.standard_normal((8, 3, 7, 7), dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(X, W, pad=3, stride=2, lanes=8)
    sch = ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, lanes=8, parallel=False)
    assert "parallel" not in str(sch)
    mod = pl.build(sch)
    assert "conv_pool_conv: 128 element(s) kept in registers" in mod.source
    expected = reference(x, wt, None, 3, 2, 3, 2, 1)
    np.testing.assert_allclose(run(mod, (x, wt), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


def test_nan_and_negative_values_at_the_borders_follow_torch(rng):
    # the padded window positions are left out of the max (torch pads with -inf): with a
    # bias that makes every value negative, the ReLU gives zeros, never a padded value
    x = rng.standard_normal((1, 2, 23, 22), dtype=np.float32)
    x[0, 1, 0, 0] = np.nan
    x[0, 0, 22, 21] = np.nan
    wt = rng.standard_normal((5, 2, 3, 3), dtype=np.float32)
    b = np.array([-100, 0, 1, -0.5, 2], np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B = pl.placeholder(b.shape, name="B")
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(X, W, B, pad=1, stride=2, lanes=4)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, k_tile=5, lanes=4))
    expected = reference(x, wt, b, 1, 2, 3, 2, 1)
    assert np.isnan(expected).sum() > 0 and (np.nan_to_num(expected[0, 0]) == 0).all()
    np.testing.assert_allclose(run(mod, (x, wt, b), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


def test_malformed_operands_are_refused():
    X = pl.placeholder((1, 3, 16, 16), name="X")
    W = pl.placeholder((8, 3, 7, 7), name="W")
    op = ops.conv2d_bias_relu_maxpool_overlap_nchw
    with pytest.raises(pl.ScheduleError, match="pool_pad must be .* less than pool_stride"):
        op(X, W, pad=3, stride=2, pool=5, pool_stride=2, pool_pad=2)
    with pytest.raises(pl.ScheduleError, match="width must be a constant"):
        op(pl.placeholder((1, 3, 16, pl.var("w")), name="Y"), W, pad=3)
    with pytest.raises(pl.ScheduleError, match=r"bias must be \(8,\) or \(8, 1, 1\)"):
        op(X, W, pl.placeholder((3,), name="B"), pad=3)
    with pytest.raises(pl.ScheduleError, match="does not fit"):
        op(X, pl.placeholder((8, 3, 17, 17), name="W2"))
    with pytest.raises(pl.ScheduleError, match="stride must be a positive integer"):
        op(X, W, pad=3, stride=0)
    out = op(X, W, pad=3, stride=2, lanes=4)
    with pytest.raises(pl.ScheduleError, match="not whole vectors of 16"):
        ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, lanes=16)
    with pytest.raises(pl.ScheduleError, match="not whole tiles of 3"):
        ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(out, lanes=4, row_tile=3)
    with pytest.raises(pl.ScheduleError, match="expected the result"):
        ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(ops.conv2d_nchw(X, W))


@pytest.mark.parametrize("chunks", [1, 3])
def test_channel_tiles_in_chunks_that_do_not_divide(rng, chunks):
    # 20 channels in tiles of 5: 4 tiles, in 1 chunk (every tile inside the row loop) or in
    # 3 chunks of 2 tiles (the last chunk has one tile)
    x = rng.standard_normal((1, 3, 25, 31), dtype=np.float32)
    wt = rng.standard_normal((20, 3, 7, 7), dtype=np.float32)
    b = rng.standard_normal(20, dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B = pl.placeholder(b.shape, name="B")
    out = ops.conv2d_bias_relu_maxpool_overlap_nchw(X, W, B, pad=3, stride=2, lanes=8)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_overlap_nchw(
        out, k_tile=5, chunks=chunks, lanes=8))
    expected = reference(x, wt, b, 3, 2, 3, 2, 1)
    np.testing.assert_allclose(run(mod, (x, wt, b), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)
