# SPDX-License-Identifier: Apache-2.0
"""Strided convolutions of an imported model run polyloop.ops' conv2d recipe on weights packed
once at build time, and equal PyTorch (odd sizes, channels off the vector width, a symbolic
batch, NaN-poisoned outputs)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes import conv_epilogue_schedule

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn


class StridedNet(nn.Module):
    """A ResNet-like stem and downsampling: 7x7 stride 2 on 3 channels + BN + ReLU, a 3x3
    stride-2 conv with bias, a 1x1 stride-2 downsample + BN, a 3x3 stride-1 conv, a skip."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 20, 7, 2, 3, bias=False), nn.BatchNorm2d(20),
                                  nn.ReLU())
        self.c1 = nn.Conv2d(20, 33, 3, 2, 1)
        self.c2 = nn.Conv2d(33, 33, 3, 1, 1, bias=False)
        self.down = nn.Sequential(nn.Conv2d(20, 33, 1, 2, bias=False), nn.BatchNorm2d(33))

    def forward(self, x):
        y = self.stem(x)
        return torch.relu(self.c2(torch.relu(self.c1(y))) + self.down(y))


@pytest.fixture(scope="module")
def strided():
    torch.manual_seed(3)
    model = StridedNet().eval()
    for m in model.modules():           # non-trivial batch-norm statistics to fold
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    g = pl.graph.from_torch(model, (torch.randn(2, 3, 29, 27),), batch="batch")
    return model, pl.graph.build(g)


@pytest.mark.parametrize("batch", [2, 1])
def test_strided_model_equals_pytorch(strided, batch):
    model, ex = strided
    x = torch.randn(batch, 3, 29, 27)
    out = np.full((batch, 33, 8, 7), np.nan, np.float32)
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_strided_convs_run_the_library_recipe_on_packed_weights(strided):
    _, ex = strided
    g = ex.graph
    convs = [b for b in g.bindings if isinstance(b, pl.graph.KernelCall)
             and b.kernel.body[0].op is pl.graph.Op.CONV2D]
    assert len(convs) == 4
    for kc in convs:
        # the product on a 5-D packed constant (the recipe's operands), alone in its kernel or
        # followed by its elementwise epilogue, which the recipe applies to each tile
        conv = kc.kernel.body[0]
        assert kc.inputs[:2] == conv.inputs, kc.kernel.name
        assert conv.inputs[1].name.endswith("_packed") and len(conv.inputs[1].type.shape) == 5
        assert all(c.op in pl.graph.ir.INJECTIVE for c in kc.kernel.body[1:]), kc.kernel.name
        fused = conv_epilogue_schedule(kc)
        assert (fused is None) == (len(kc.kernel.body) == 1), kc.kernel.name
    strides = sorted(kc.kernel.body[0].attr("stride") for kc in convs)
    assert strides == [(1, 1), (2, 2), (2, 2), (2, 2)]
    packed = {c.value.name for c in g.constants if c.value.name.endswith("_packed")}
    assert packed == {kc.inputs[1].name for kc in convs}
    # the three convolutions whose result only an elementwise chain reads take it in
    assert sum(len(kc.kernel.body) > 1 for kc in convs) == 3


class SharedConv(nn.Module):
    """One convolution applied twice: its weights are packed once."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(9, 9, 3, 2, 1, bias=False)

    def forward(self, x):
        return self.c(torch.relu(self.c(x)))


def test_weights_shared_by_two_convs_are_packed_once():
    torch.manual_seed(4)
    model = SharedConv().eval()
    x = torch.randn(1, 9, 13, 11)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    packed = [c for c in ex.graph.constants if c.value.name.endswith("_packed")]
    assert len(packed) == 1
    out = np.full((1, 9, 4, 3), np.nan, np.float32)
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-4)
