# SPDX-License-Identifier: Apache-2.0
"""A first-layer convolution, its bias and ReLU and the max-pool after it become one kernel
(graph.passes.fuse_conv_pool) run by polyloop.ops' fused recipe, equal to PyTorch; the
convolutions and poolings it must leave alone stay two kernels."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes import conv_pool_schedule

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn

from .test_from_torch import assert_matches_torch, run_poisoned  # noqa: E402 - after the skip


def kernels(g):
    return [b for b in g.bindings if isinstance(b, pl.graph.KernelCall)]


def test_seed_cnn_runs_the_fused_recipe(seed_cnn):
    model, ex = seed_cnn
    fused = [kc for kc in kernels(ex.graph) if conv_pool_schedule(kc) is not None]
    assert [kc.kernel.name for kc in fused] == ["model_k0_conv2d_pool"]
    assert [str(c.op) for c in fused[0].kernel.body] == ["conv2d", "add", "relu", "max_pool2d"]
    # no kernel writes the full-size convolution output
    assert all(v.type.shape[1:] != (32, 26, 26) for kc in kernels(ex.graph) for v in kc.outputs)
    source = "".join(p.read_text() for p in ex.library.source_path.parent.glob("*.c"))
    assert "_conv_local" in source
    for batch in (1, 3):
        x = torch.randn(batch, 1, 28, 28)
        assert_matches_torch(ex, model, x)


class TwoLayers(nn.Module):
    """Two input channels and padding (fused, pool 3), then a conv of 6 channels (not fused:
    too many channels), a pool whose window is not its stride (not fused)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(2, 6, 3, padding=1)
        self.c2 = nn.Conv2d(6, 5, 3, bias=False)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.c1(x)), 3)
        return nn.functional.max_pool2d(torch.relu(self.c2(y)), 3, stride=2)


def test_only_small_convolutions_with_tiling_pools_are_fused():
    torch.manual_seed(4)
    model = TwoLayers().eval()
    g = pl.graph.from_torch(model, (torch.randn(2, 2, 31, 29),), batch="n")
    ex = pl.graph.build(g)
    fused = [kc for kc in kernels(ex.graph) if conv_pool_schedule(kc) is not None]
    assert len(fused) == 1 and fused[0].kernel.body[0].inputs[0].name == "x"
    for batch in (1, 4):
        x = torch.randn(batch, 2, 31, 29)
        assert_matches_torch(ex, model, x)


class SharedActivation(nn.Module):
    """The ReLU's output is read by the pooling and by a second branch: not fused."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(1, 4, 3, bias=False)

    def forward(self, x):
        y = torch.relu(self.c(x))
        return nn.functional.max_pool2d(y, 2), y * 2.0


def test_a_convolution_read_twice_is_not_fused():
    model = SharedActivation().eval()
    x = torch.randn(1, 1, 9, 9)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    assert not any(conv_pool_schedule(kc) is not None for kc in kernels(ex.graph))
    with torch.no_grad():
        for got, ref in zip(run_poisoned(ex, x.numpy()), model(x)):
            np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-5)


def conv_relu_pool(c_in=1, stride=1, kernel=(2, 2), pool_stride=(2, 2), pool_pad=(0, 0),
                   weight=None, bias=True):
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", ("n", c_in, 12, 11))
    w = b.constant(np.ones((3, c_in, 3, 3), "float32") if weight is None else weight)
    operands = (x, w, b.constant(np.ones(3, "float32"))) if bias else (x, w)
    y = b.emit(pl.graph.Op.CONV2D, *operands, stride=(stride, stride), padding=(1, 1),
               dilation=(1, 1), groups=1)
    y = b.emit(pl.graph.Op.MAX_POOL2D, b.emit(pl.graph.Op.RELU, y), kernel=kernel,
               stride=pool_stride, padding=pool_pad)
    return b.build(y)


@pytest.mark.parametrize("change, fused", [
    ({}, True), ({"c_in": 4}, True), ({"c_in": 5}, False), ({"stride": 2}, False),
    ({"pool_stride": (1, 1)}, False), ({"pool_pad": (1, 1)}, False),
    ({"kernel": (3, 3), "pool_stride": (3, 3)}, True)])
def test_which_convolutions_and_poolings_are_fused(change, fused):
    g = pl.graph.optimize(conv_relu_pool(**change))
    assert any(conv_pool_schedule(kc) is not None for kc in kernels(g)) == fused


def test_a_convolution_without_bias_is_fused_and_equals_pytorch(rng):
    w = rng.standard_normal((3, 1, 3, 3), dtype=np.float32)
    ex = pl.graph.build(conv_relu_pool(weight=w, bias=False))
    fused = [kc for kc in kernels(ex.graph) if conv_pool_schedule(kc) is not None]
    assert [str(c.op) for c in fused[0].kernel.body] == ["conv2d", "copy", "relu", "max_pool2d"]
    x = rng.standard_normal((2, 1, 12, 11), dtype=np.float32)
    F = nn.functional
    with torch.no_grad():
        ref = F.max_pool2d(torch.relu(F.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                               padding=1)), 2).numpy()
    np.testing.assert_allclose(run_poisoned(ex, x), ref, rtol=1e-5, atol=1e-5)
