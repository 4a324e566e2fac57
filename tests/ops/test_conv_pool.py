# SPDX-License-Identifier: Apache-2.0
"""conv2d + bias + ReLU + max-pool as one operator (polyloop.ops.conv2d_bias_relu_maxpool_nchw)
against PyTorch: odd image sizes, channel counts off the tile, pools of 2 and 3, padding,
packed weights, no bias, a symbolic batch, NaN-poisoned outputs; malformed operands refused."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional (extra 'graph')")


def reference(x, w, b, pad, pool):
    F = torch.nn.functional
    with torch.no_grad():
        y = F.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                     None if b is None else torch.from_numpy(b).double(), padding=pad)
        return F.max_pool2d(torch.relu(y), pool).numpy()


def run(mod, args, shape):
    out = np.full(shape, np.nan, np.float32)
    mod(*args, out)
    return out


@pytest.mark.parametrize("n, c, h, w, k, pad, pool, lanes, k_tile",
                         [(3, 1, 13, 11, 5, 0, 2, None, 4), (1, 2, 9, 12, 7, 1, 3, 4, 3),
                          (4, 1, 10, 17, 8, 1, 2, 8, 2)])
def test_conv_pool_matches_torch(rng, n, c, h, w, k, pad, pool, lanes, k_tile):
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
    b = rng.standard_normal(k, dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B = pl.placeholder(b.shape, name="B")
    out = ops.conv2d_bias_relu_maxpool_nchw(X, W, B, pad, pool, lanes=lanes)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_nchw(out, k_tile=k_tile, lanes=lanes))
    expected = reference(x, wt, b, pad, pool)
    np.testing.assert_allclose(run(mod, (x, wt, b), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 3])
def test_packed_weights_chw_bias_and_symbolic_batch(rng, batch):
    n = pl.var("n")
    wt = rng.standard_normal((20, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(20, dtype=np.float32)
    packed = ops.pack_conv2d_weight(wt, 16)
    X = pl.placeholder((n, 1, 15, 15), name="X")
    P, B = pl.placeholder(packed.shape, name="P"), pl.placeholder((20, 1, 1), name="B")
    out = ops.conv2d_bias_relu_maxpool_nchw(X, P, B, out_channels=20)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_nchw(out))
    x = rng.standard_normal((batch, 1, 15, 15), dtype=np.float32)
    expected = reference(x, wt, b, 0, 2)
    got = run(mod, (x, packed, b.reshape(20, 1, 1)), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_without_bias_and_serial(rng):
    x = rng.standard_normal((2, 1, 8, 9), dtype=np.float32)
    wt = rng.standard_normal((6, 1, 3, 3), dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    out = ops.conv2d_bias_relu_maxpool_nchw(X, W, pad=1)
    sch = ops.schedule_conv2d_bias_relu_maxpool_nchw(out, parallel=False)
    assert "parallel" not in str(sch)
    expected = reference(x, wt, None, 1, 2)
    np.testing.assert_allclose(run(pl.build(sch), (x, wt), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


def test_nan_in_a_window_propagates_like_torch(rng):
    # the pooled rows are a max of vectors: a NaN anywhere in a window must reach the output
    x = rng.standard_normal((2, 1, 12, 21), dtype=np.float32)
    x[0, 0, 3, 5] = np.nan
    x[1, 0, 10, 20] = np.nan
    wt = rng.standard_normal((5, 1, 3, 3), dtype=np.float32)
    b = rng.standard_normal(5, dtype=np.float32)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B = pl.placeholder(b.shape, name="B")
    out = ops.conv2d_bias_relu_maxpool_nchw(X, W, B, lanes=8)
    mod = pl.build(ops.schedule_conv2d_bias_relu_maxpool_nchw(out, lanes=8))
    expected = reference(x, wt, b, 0, 2)
    assert np.isnan(expected).sum() > 0
    np.testing.assert_allclose(run(mod, (x, wt, b), expected.shape), expected,
                               rtol=1e-5, atol=1e-5)


def test_malformed_operands_are_refused():
    X = pl.placeholder((1, 1, 8, 8), name="X")
    W = pl.placeholder((4, 1, 3, 3), name="W")
    with pytest.raises(pl.ScheduleError, match="height must be a constant"):
        ops.conv2d_bias_relu_maxpool_nchw(pl.placeholder((1, 1, pl.var("h"), 8), name="Y"), W)
    with pytest.raises(pl.ScheduleError, match=r"bias must be \(4,\) or \(4, 1, 1\)"):
        ops.conv2d_bias_relu_maxpool_nchw(X, W, pl.placeholder((5,), name="B"))
    with pytest.raises(pl.ScheduleError, match="data has 1 channels, weight expects 2"):
        ops.conv2d_bias_relu_maxpool_nchw(X, pl.placeholder((4, 2, 3, 3), name="W2"))
    with pytest.raises(pl.ScheduleError, match="does not fit"):
        ops.conv2d_bias_relu_maxpool_nchw(X, W, pool=7)
    with pytest.raises(pl.ScheduleError, match="out_channels given"):
        ops.conv2d_bias_relu_maxpool_nchw(X, pl.placeholder((1, 1, 3, 3, 8), name="P"))
    out = ops.conv2d_bias_relu_maxpool_nchw(X, W, lanes=4)
    with pytest.raises(pl.ScheduleError, match="not whole vectors of 16"):
        ops.schedule_conv2d_bias_relu_maxpool_nchw(out, lanes=16)
    with pytest.raises(pl.ScheduleError, match="expected the result"):
        ops.schedule_conv2d_bias_relu_maxpool_nchw(X)
