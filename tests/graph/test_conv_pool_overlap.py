# SPDX-License-Identifier: Apache-2.0
"""ResNet's stem (7 x 7 stride-2 convolution, batch norm, ReLU, 3 x 3 stride-2 max-pool padded
by 1) becomes one kernel (graph.passes.fuse_conv_overlapping_pool, applied to an optimized
graph) run by polyloop.ops' overlapping-pool recipe, equal to PyTorch at two batch sizes; the
patterns it must leave alone (average pool, a convolution read twice, padding past the stride,
many input channels, the tiling pools fuse_conv_pool takes) are not fused by it."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes import (conv_overlapping_pool_schedule, conv_pool_schedule,
                                   fuse_conv_overlapping_pool)

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn


def kernels(g):
    return [b for b in g.bindings if isinstance(b, pl.graph.KernelCall)]


def overlapping(g):
    return [kc for kc in kernels(g) if conv_overlapping_pool_schedule(kc) is not None]


class Stem(nn.Module):
    """ResNet-18's first layers on a small image, 20 channels (not whole vectors)."""

    def __init__(self, channels: int = 20) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 7, 2, 3, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        return nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 3, 2, 1)


def run_kernel(g, kc, x, shape):
    """Build ``kc`` with its recipe and run it on input ``x`` and the graph's constants, its
    result poisoned with NaN first."""
    data = g.constant_data()
    mod = pl.build(conv_overlapping_pool_schedule(kc))
    args = [x if p.name == g.inputs[0].name else data[p.name] for p in kc.kernel.params]
    out = np.full(shape, np.nan, np.float32)
    mod(*args, out)
    return out


def test_resnet_stem_is_one_kernel_equal_to_pytorch():
    torch.manual_seed(7)
    model = Stem().eval()
    g = pl.graph.optimize(pl.graph.from_torch(model, (torch.randn(2, 3, 37, 41),), batch="n"))
    assert not overlapping(g)                 # pl.graph.build does not run the pass
    fused_g = fuse_conv_overlapping_pool(g)
    fused = overlapping(fused_g)
    assert len(kernels(fused_g)) == 1 and len(fused) == 1
    assert [str(c.op) for c in fused[0].kernel.body] == ["conv2d", "add", "relu", "max_pool2d"]
    for batch in (1, 2):
        x = torch.randn(batch, 3, 37, 41)
        with torch.no_grad():
            ref = model(x).numpy()
        np.testing.assert_allclose(run_kernel(fused_g, fused[0], x.numpy(), ref.shape), ref,
                                   rtol=1e-5, atol=1e-5)


def conv_relu_pool(c_in=3, stride=2, op=pl.graph.Op.MAX_POOL2D, kernel=(3, 3),
                   pool_stride=(2, 2), pool_pad=(1, 1), bias=True):
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", (1, c_in, 24, 21))
    w = b.constant(np.ones((8, c_in, 7, 7), "float32"))
    operands = (x, w, b.constant(np.ones(8, "float32"))) if bias else (x, w)
    y = b.emit(pl.graph.Op.CONV2D, *operands, stride=(stride, stride), padding=(3, 3),
               dilation=(1, 1), groups=1)
    pool = {"kernel": kernel, "stride": pool_stride, "padding": pool_pad}
    if op is pl.graph.Op.AVG_POOL2D:
        pool["count_include_pad"] = True
    return b.build(b.emit(op, b.emit(pl.graph.Op.RELU, y), **pool))


@pytest.mark.parametrize("change, fused", [
    ({}, True), ({"bias": False}, True), ({"stride": 1}, True),
    ({"pool_pad": (0, 0)}, True), ({"kernel": (2, 2), "pool_pad": (0, 0)}, True),
    ({"c_in": 5}, False), ({"op": pl.graph.Op.AVG_POOL2D}, False),
    ({"kernel": (5, 5), "pool_pad": (2, 2)}, False),
    ({"stride": 1, "kernel": (2, 2), "pool_pad": (0, 0)}, False)])
def test_which_poolings_are_fused(change, fused):
    g = fuse_conv_overlapping_pool(pl.graph.optimize(conv_relu_pool(**change)))
    assert bool(overlapping(g)) == fused
    if change == {"stride": 1, "kernel": (2, 2), "pool_pad": (0, 0)}:   # fuse_conv_pool's
        assert any(conv_pool_schedule(kc) is not None for kc in kernels(g))


class SharedActivation(nn.Module):
    """The convolution's output is read by the pooling and by a second branch: not fused."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 6, 7, 2, 3, bias=False)

    def forward(self, x):
        y = self.c(x)
        return nn.functional.max_pool2d(torch.relu(y), 3, 2, 1), y * 2.0


def test_a_convolution_read_twice_is_not_fused():
    model = SharedActivation().eval()
    x = torch.randn(1, 3, 19, 18)
    g = fuse_conv_overlapping_pool(pl.graph.optimize(pl.graph.from_torch(model, (x,))))
    assert not overlapping(g)
    assert any(b.kernel.body[0].op is pl.graph.Op.CONV2D and len(b.kernel.body) == 1
               for b in kernels(g))
