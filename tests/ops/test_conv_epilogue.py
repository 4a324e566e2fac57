# SPDX-License-Identifier: Apache-2.0
"""A convolution with its elementwise epilogue (bias, residual add, ReLU) in one kernel
(polyloop.ops.schedule_conv2d_epilogue) against PyTorch: odd sizes, channels off the vector
width, stride 1 and 2, packed and plain weights, the c_block and parallel knobs, a symbolic
batch, NaN-poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

pytest.importorskip("torch", reason="the reference is torch.nn.functional.conv2d (extra 'graph')")

from .test_conv_strided import reference   # noqa: E402 - after the skip


def _chain(conv, bias, residual):
    """relu(conv + bias[k] + residual), as three stages (the graph's form)."""
    biased = pl.compute(conv.shape, lambda n, k, y, x: conv[n, k, y, x] + bias[k, 0, 0],
                        name="biased")
    summed = pl.compute(conv.shape, lambda n, k, y, x: biased[n, k, y, x] + residual[n, k, y, x],
                        name="summed")
    return pl.compute(conv.shape, lambda n, k, y, x: pl.maximum(summed[n, k, y, x], 0.0),
                      name="relu")


@pytest.mark.parametrize("c, h, w, k, r, pad, stride, packed, knobs", [
    (5, 9, 11, 33, 3, 1, 1, True, {}),
    (3, 15, 13, 20, 7, 3, 2, True, {}),
    (6, 11, 10, 9, 1, 0, 2, False, dict(lanes=8, k_vectors=1)),
    (19, 7, 7, 40, 3, 1, 1, True, dict(c_block=8)),
    (7, 9, 9, 18, 3, 1, 2, True, dict(parallel="y", w_block=3, prefetch=3)),
    (19, 7, 7, 33, 5, 2, 1, True, {}),
])
def test_conv_epilogue_matches_torch(rng, c, h, w, k, r, pad, stride, packed, knobs):
    batch = pl.var("batch")
    x = rng.standard_normal((2, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, r), dtype=np.float32)
    bias = rng.standard_normal((k, 1, 1), dtype=np.float32)
    expected = reference(x, wt, pad, stride)
    residual = rng.standard_normal(expected.shape, dtype=np.float32)
    lanes = knobs.get("lanes") or ops.knobs.default_lanes()
    weights = ops.pack_conv2d_weight(wt, lanes * knobs.get("k_vectors", 2)) if packed else wt
    X = pl.placeholder((batch, c, h, w), name="X")
    W = pl.placeholder(weights.shape, name="W")
    conv = ops.conv2d_nchw_packed(X, W, k, pad, stride) if packed \
        else ops.conv2d_nchw(X, W, pad, stride)
    B = pl.placeholder((k, 1, 1), name="B")
    R = pl.placeholder((batch, k) + expected.shape[2:], name="R")
    mod = pl.build(ops.schedule_conv2d_epilogue(_chain(conv, B, R), conv, **knobs))
    # packed weights on small planes, at most 64 cache lines per input channel as the hint
    # counts them (each of the r * r rows of a block may start anywhere in a line: 75 for
    # 5 x 5 x 32), or an explicit knob, are prefetched
    block = lanes * knobs.get("k_vectors", 2)
    small = expected.shape[2] * expected.shape[3] <= 64 \
        and r * r * -(-(60 + block * 4) // 64) <= 64 and "c_block" not in knobs
    assert ("__builtin_prefetch" in mod.source) == (packed and (small or "prefetch" in knobs))
    out = np.full(expected.shape, np.nan, np.float32)
    mod(x, weights, B=bias, R=residual, relu=out)
    np.testing.assert_allclose(out, np.maximum(expected + bias + residual, 0.0),
                               rtol=1e-4, atol=1e-4)


def test_a_stage_that_is_not_elementwise_is_refused():
    X = pl.placeholder((1, 3, 8, 8), name="X")
    W = pl.placeholder((4, 3, 3, 3), name="W")
    conv = ops.conv2d_nchw(X, W)
    c = pl.reduce_axis((0, 4), name="c")
    pooled = pl.compute((1, 8, 8), lambda n, y, x: pl.sum(conv[n, c, y, x], axis=c), name="pool")
    with pytest.raises(pl.ScheduleError, match="pool .* must be elementwise"):
        ops.schedule_conv2d_epilogue(pooled, conv)
    with pytest.raises(pl.ScheduleError, match="does not read the convolution"):
        ops.schedule_conv2d_epilogue(pl.compute((2,), lambda i: X[0, 0, 0, i] * 2.0), conv)
