# SPDX-License-Identifier: Apache-2.0
"""The graph level runs 3x3 stride-1 convolutions with enough channels as Winograd
(passes.winograd): a ResNet basic block built with it equals PyTorch; ``winograd=False`` gives
the direct recipe; the rule keeps small planes, few channels, strides and 1x1 kernels direct."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.passes.winograd import MIN_CHANNELS, winograd_conv

torch = pytest.importorskip("torch", reason="the models are PyTorch modules (extra 'graph')")

from .models import BasicBlock  # noqa: E402 - after the skip


def _conv_calls(ex):
    return [c for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall)
            for c in b.kernel.body if c.op is Op.CONV2D]


@pytest.fixture(scope="module")
def block():
    torch.manual_seed(0)
    model = BasicBlock(MIN_CHANNELS + 3).eval()
    # 15 x 13: 8 x 7 = 56 tiles, partial tiles at both edges
    x = torch.randn(2, MIN_CHANNELS + 3, 15, 13)
    g = pl.graph.from_torch(model, (x,))
    with torch.no_grad():
        expected = model(x).numpy()
    return g, x.numpy(), expected


@pytest.mark.parametrize("winograd", [True, False])
def test_basic_block_equals_torch(block, winograd):
    g, x, expected = block
    ex = pl.graph.build(g, winograd=winograd)
    convs = _conv_calls(ex)
    assert len(convs) == 2
    assert all(bool(c.attr("winograd")) == winograd for c in convs)
    # both convolutions carry their bias (folded batch norm), the residual and ReLU
    assert len([b for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall)]) == 2
    out = np.full(expected.shape, np.nan, np.float32)
    ex(x, out=(out,))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def _call(c, h, k, *, r=3, stride=1, groups=1, dtype="float32"):
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", (1, c, h, h), dtype)
    w = b.constant(np.zeros((k, c // groups, r, r), dtype), "w")
    y = b.emit(Op.CONV2D, x, w, stride=(stride, stride), padding=(r // 2, r // 2),
               dilation=(1, 1), groups=groups)
    return b.build(y).bindings[-1]


@pytest.mark.parametrize("call, chosen", [
    (_call(64, 56, 64), True),
    (_call(256, 14, 256), True),            # 49 tiles
    (_call(512, 7, 512), False),            # 16 tiles: the weights stream for few tiles
    (_call(MIN_CHANNELS - 1, 56, 64), False),
    (_call(64, 56, 64, stride=2), False),
    (_call(64, 56, 64, r=1), False),
    (_call(64, 56, 64, groups=64), False),
])
def test_which_convolutions_run_as_winograd(call, chosen):
    assert winograd_conv(call) == chosen


def test_symbolic_batch_runs_every_batch(rng):
    c = MIN_CHANNELS + 1
    w = rng.standard_normal((c, c, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(c, dtype=np.float32)
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", ("n", c, 14, 15))
    y = b.emit(Op.RELU, b.emit(Op.CONV2D, x, b.constant(w, "w"), b.constant(bias, "bias"),
                                stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1))
    ex = pl.graph.build(b.build(y))
    assert [c.attr("winograd") for c in _conv_calls(ex)] == [True]
    t = torch.from_numpy
    for batch in (1, 3):
        xs = rng.standard_normal((batch, c, 14, 15), dtype=np.float32)
        out = np.full((batch, c, 14, 15), np.nan, np.float32)
        ex(xs, out=(out,))
        expected = torch.relu(torch.nn.functional.conv2d(t(xs), t(w), t(bias), padding=1))
        np.testing.assert_allclose(out, expected.numpy(), rtol=1e-4, atol=1e-4)
