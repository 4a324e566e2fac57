# SPDX-License-Identifier: Apache-2.0
"""conv2d + bias + ReLU + max-pool + flatten + dense (+ ReLU) as one operator with the batch
along the vectors (polyloop.ops.conv_pool_dense_nchw) against PyTorch: batches that are not
whole vectors, dense columns that are not whole panels, odd images, pools of 2 and 3,
padding, packed convolution weights, no biases, no final ReLU, NaN-poisoned outputs;
malformed operands refused."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional (extra 'graph')")


def reference(x, w, b, wd, bd, pad, pool, relu):
    F = torch.nn.functional
    t = {k: None if a is None else torch.from_numpy(a).double()
         for k, a in dict(x=x, w=w, b=b, wd=wd, bd=bd).items()}
    with torch.no_grad():
        y = F.max_pool2d(torch.relu(F.conv2d(t["x"], t["w"], t["b"], padding=pad)), pool)
        y = F.linear(torch.flatten(y, 1), t["wd"].T, t["bd"])
        return (torch.relu(y) if relu else y).numpy()


def operands(rng, batch, c, h, w, k, pad, pool, columns):
    x = rng.standard_normal((batch, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
    b = rng.standard_normal(k, dtype=np.float32)
    features = k * ((h + 2 * pad - 2) // pool) * ((w + 2 * pad - 2) // pool)
    wd = (rng.standard_normal((features, columns)) / np.sqrt(features)).astype(np.float32)
    bd = rng.standard_normal(columns, dtype=np.float32)
    return x, wt, b, wd, bd


def run(mod, args, shape):
    out = np.full(shape, np.nan, np.float32)
    mod(*args, out)
    return out


@pytest.mark.parametrize("batch, c, h, w, k, pad, pool, columns, rows, lanes, k_tile, images", [
    (3, 1, 13, 11, 5, 0, 2, 7, 10, 4, 4, None),   # under one vector, k off the tile
    (17, 1, 10, 9, 6, 1, 2, 13, 10, None, 4, None),  # the host's lanes: two vectors
    (9, 2, 9, 12, 7, 1, 3, 10, 3, 4, 3, True),     # two channels, pool 3, 3 vectors of images
    (20, 1, 8, 8, 4, 0, 2, 23, 6, 4, 2, False),    # five vectors of images: three tiles
    (20, 1, 8, 8, 4, 0, 2, 23, 6, 4, 2, True),
])
def test_matches_torch(rng, batch, c, h, w, k, pad, pool, columns, rows, lanes, k_tile, images):
    x, wt, b, wd, bd = operands(rng, batch, c, h, w, k, pad, pool, columns)
    packed = ops.pack_matmul_weight(wd, rows)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(wt.shape, name="W")
    B, P = pl.placeholder(b.shape, name="B"), pl.placeholder(packed.shape, name="P")
    BD = pl.placeholder(bd.shape, name="BD")
    out = ops.conv_pool_dense_nchw(X, W, B, P, BD, columns=columns, pad=pad, pool=pool,
                                   lanes=lanes)
    mod = pl.build(ops.schedule_conv_pool_dense_nchw(out, k_tile=k_tile, lanes=lanes,
                                                     parallel_images=images))
    expected = reference(x, wt, b, wd, bd, pad, pool, True)
    got = run(mod, (x, wt, b, packed, bd), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_packed_conv_weights_no_biases_no_relu(rng):
    batch, columns = 6, 11
    x, wt, _, wd, _ = operands(rng, batch, 1, 9, 10, 5, 0, 2, columns)
    conv_packed = ops.pack_conv2d_weight(wt, 4)
    dense_packed = ops.pack_matmul_weight(wd, 3)
    X, W = pl.placeholder(x.shape, name="X"), pl.placeholder(conv_packed.shape, name="W")
    P = pl.placeholder(dense_packed.shape, name="P")
    out = ops.conv_pool_dense_nchw(X, W, None, P, None, columns=columns, relu=False,
                                   out_channels=5, lanes=4)
    mod = pl.build(ops.schedule_conv_pool_dense_nchw(out, lanes=4, parallel=False))
    expected = reference(x, wt, None, wd, None, 0, 2, False)
    assert (expected < 0).any()            # no ReLU at the end: negative results stay
    got = run(mod, (x, conv_packed, dense_packed), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_malformed_operands_are_refused():
    X = pl.placeholder((4, 1, 8, 8), name="X")
    W = pl.placeholder((4, 1, 3, 3), name="W")
    good = pl.placeholder((2, 36, 5), name="P")
    with pytest.raises(pl.ScheduleError, match="reduce over 40 features"):
        ops.conv_pool_dense_nchw(X, W, None, pl.placeholder((2, 40, 5), name="Q"), None,
                                 columns=10)
    with pytest.raises(pl.ScheduleError, match="fewer than the 11 columns"):
        ops.conv_pool_dense_nchw(X, W, None, good, None, columns=11)
    with pytest.raises(pl.ScheduleError, match="the batch must be a constant"):
        ops.conv_pool_dense_nchw(pl.placeholder((pl.var("n"), 1, 8, 8), name="Y"), W, None,
                                 good, None, columns=10)
    with pytest.raises(pl.ScheduleError, match="dense bias must be"):
        ops.conv_pool_dense_nchw(X, W, None, good, pl.placeholder((9,), name="b"), columns=10)
    out = ops.conv_pool_dense_nchw(X, W, None, good, None, columns=10, lanes=4)
    with pytest.raises(pl.ScheduleError, match="build the operator with lanes=8"):
        ops.schedule_conv_pool_dense_nchw(out, lanes=8)
    with pytest.raises(pl.ScheduleError, match="expected the result of conv_pool_dense_nchw"):
        ops.schedule_conv_pool_dense_nchw(X)
