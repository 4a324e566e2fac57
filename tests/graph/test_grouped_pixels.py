# SPDX-License-Identifier: Apache-2.0
"""Grouped convolutions of few channels per group, stride 1, on images that span several pixel
tiles run the pixel-tile recipe in a built graph (weights packed per group at build time, the
bias, residual add and ReLU applied per tile) and equal PyTorch on odd image sizes, with
NaN-poisoned outputs; a strided one, or one on a small image, keeps the packed recipe."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.passes.library import conv_block

torch = pytest.importorskip("torch", reason="the reference is PyTorch")
nn = torch.nn


class Block(nn.Module):
    """24 channels: 3 x 3 in 6 groups of 4 (+ residual, ReLU), 1 x 5 in 3 groups of 8, a
    strided 3 x 3 in 6 groups."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(24, 24, 3, padding=1, groups=6)
        self.b = nn.Conv2d(24, 24, (1, 5), padding=(0, 2), groups=3, bias=False)
        self.c = nn.Conv2d(24, 24, 3, stride=2, padding=1, groups=6)

    def forward(self, x):
        y = torch.relu(self.a(x) + x)
        return self.c(torch.relu(self.b(y)))


def _pixel_convs(ex) -> list:
    return [c for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall)
            for c in b.kernel.body if c.op is Op.CONV2D and c.attr("pixels")]


@pytest.mark.parametrize("side", [(23, 21), (5, 7)])
def test_grouped_convolutions_equal_pytorch(side):
    torch.manual_seed(side[0])
    net = Block().eval()
    x = torch.randn(1, 24, *side)
    ex = pl.graph.build(pl.graph.from_torch(net, (x,)))
    # 23 x 21: the stride-1 layers whose packed block would hold several groups on pixel tiles
    # (4 per group; 8 per group when a block is wider than 8); 5 x 7: one tile, none
    several = sum(conv_block(24, groups) > 24 // groups for groups in (6, 3))
    assert several >= 1
    assert len(_pixel_convs(ex)) == (several if side[0] > 5 else 0)
    for _ in range(2):
        x = torch.randn(1, 24, *side)
        with torch.no_grad():
            want = net(x).numpy()
        out = np.full(want.shape, np.nan, "float32")
        ex(x.numpy(), out=(out,))
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
