# SPDX-License-Identifier: Apache-2.0
"""The Winograd F(2x2, 3x3) convolution (polyloop.ops.conv2d_winograd) against PyTorch: odd
image sizes (partial tiles), channels off the vector width and the weight block, padding 1 and
0, batch 1 and 2 and a symbolic batch, both parallel layouts, with and without a bias +
residual + ReLU epilogue, NaN-poisoned outputs; and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

pytest.importorskip("torch", reason="the reference is torch.nn.functional.conv2d (extra 'graph')")

from .test_conv_epilogue import _chain   # noqa: E402 - after the skip
from .test_conv_strided import reference   # noqa: E402


def _build(n, c, h, w, k, pad, knobs, epilogue):
    X = pl.placeholder((n, c, h, w), name="X")
    U = pl.placeholder((4, 4, -(-k // knobs["block"]), c, knobs["block"]), name="U")
    conv = ops.conv2d_winograd(X, U, k, pad)
    sched = {key: v for key, v in knobs.items() if key != "block"}
    if not epilogue:
        return pl.build(ops.schedule_conv2d_winograd(conv, **sched)), conv
    B = pl.placeholder((k, 1, 1), name="B")
    R = pl.placeholder(conv.shape, name="R")
    out = _chain(conv, B, R)
    return pl.build(ops.schedule_conv2d_winograd(out, conv, **sched)), conv


@pytest.mark.parametrize("n, c, h, w, k, pad, knobs, epilogue", [
    (1, 5, 9, 11, 33, 1, dict(block=16, lanes=16), False),
    (2, 19, 7, 7, 20, 1, dict(block=16, lanes=16), True),
    (1, 17, 15, 13, 40, 0, dict(block=32, lanes=16, parallel="rows", mr=5), True),
    (2, 9, 13, 15, 12, 1, dict(block=8, lanes=8, parallel="k"), True),
    (pl.var("batch"), 6, 16, 14, 16, 1, dict(block=16, lanes=16), True),
    # a tile row's padded input over 64 KiB: padded in a pass of its own
    (1, 70, 5, 61, 20, 1, dict(block=16, lanes=16, parallel="rows"), True),
])
def test_winograd_matches_torch(rng, n, c, h, w, k, pad, knobs, epilogue):
    mod, conv = _build(n, c, h, w, k, pad, knobs, epilogue)
    batch = n if isinstance(n, int) else 2
    x = rng.standard_normal((batch, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, 3, 3), dtype=np.float32)
    u = ops.winograd_weight(wt, knobs["block"])
    expected = reference(x, wt, pad, 1)
    out = np.full(expected.shape, np.nan, np.float32)
    if epilogue:
        bias = rng.standard_normal((k, 1, 1), dtype=np.float32)
        residual = rng.standard_normal(expected.shape, dtype=np.float32)
        mod(x, u, B=bias, R=residual, relu=out)
        expected = np.maximum(expected + bias + residual, 0.0)
    else:
        mod(x, u, conv=out)
    assert not np.isnan(out).any()
    # F(2x2, 3x3) adds a few roundings to each product: a tolerance scaled by the sum's size
    scale = np.sqrt(9 * c) * 3
    np.testing.assert_allclose(out, expected, rtol=0, atol=2e-6 * scale * 4)


def test_winograd_weight_is_the_filter_transform(rng):
    wt = rng.standard_normal((3, 2, 3, 3), dtype=np.float32)
    u = ops.winograd_weight(wt, 4)
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    expected = g @ wt[2, 1].astype(np.float64) @ g.T
    np.testing.assert_allclose(u[:, :, 0, 1, 2], expected, rtol=1e-6)
    assert not u[:, :, 0, :, 3].any()          # the block's channel past K is zero


@pytest.mark.parametrize("make, match", [
    (lambda: ops.conv2d_winograd(pl.placeholder((1, 4, pl.var("h"), 8), name="X"),
                                 pl.placeholder((4, 4, 1, 4, 16), name="U"), 8),
     "must be constant"),
    (lambda: ops.conv2d_winograd(pl.placeholder((1, 4, 8, 8), name="X"),
                                 pl.placeholder((4, 4, 1, 5, 16), name="U"), 8),
     "expects 5"),
    (lambda: ops.conv2d_winograd(pl.placeholder((1, 4, 8, 8), name="X"),
                                 pl.placeholder((4, 4, 1, 4, 16), name="U"), 20),
     "need 2 blocks"),
    (lambda: ops.conv2d_winograd(pl.placeholder((1, 4, 8, 8), name="X"),
                                 pl.placeholder((3, 3, 4, 4), name="U"), 8),
     "winograd_weight"),
    (lambda: ops.winograd_weight(np.ones((4, 4, 5, 5), "float32"), 16), r"\(K, C, 3, 3\)"),
    (lambda: ops.schedule_conv2d_winograd(
        ops.conv2d_nchw(pl.placeholder((1, 4, 8, 8), name="X"),
                        pl.placeholder((4, 4, 3, 3), name="W"))),
     "conv2d_winograd"),
])
def test_winograd_refusals(make, match):
    with pytest.raises(pl.ScheduleError, match=match):
        make()


def test_winograd_epilogue_refuses_a_reduction():
    X = pl.placeholder((1, 4, 8, 8), name="X")
    conv = ops.conv2d_winograd(X, pl.placeholder((4, 4, 1, 4, 16), name="U"), 8)
    r = pl.reduce_axis((0, 8), name="r")
    pooled = pl.compute((1, 8, 8), lambda n, k, y: pl.max(conv[n, k, y, r], axis=r), name="pool")
    with pytest.raises(pl.ScheduleError, match="pool"):
        ops.schedule_conv2d_winograd(pooled, conv)
