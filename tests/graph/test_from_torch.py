# SPDX-License-Identifier: Apache-2.0
"""Models imported from PyTorch, built whole, equal to PyTorch on fresh random inputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")

from .models import BasicBlock, SeedCNN, encoder_layer  # noqa: E402


def run_poisoned(ex, *inputs):
    """Run with NaN-poisoned outputs: every element must be written."""
    g = ex.graph
    sizes = {}
    for v, x in zip(g.inputs, inputs):
        sizes.update({d: n for d, n in zip(v.type.shape, x.shape) if isinstance(d, str)})
    outs = tuple(np.full(v.type.concrete(sizes), np.nan, v.type.dtype) for v in g.outputs)
    ex(*inputs, out=outs)
    assert all(np.isfinite(o).all() for o in outs)
    return outs[0] if len(outs) == 1 else outs


def assert_matches_torch(ex, model, x):
    """``ex`` on ``x`` (poisoned outputs) equals the PyTorch ``model`` within 1e-5."""
    with torch.no_grad():
        np.testing.assert_allclose(run_poisoned(ex, x.numpy()), model(x).numpy(),
                                   rtol=1e-5, atol=1e-5)


@pytest.fixture
def cnn(seed_cnn):
    return seed_cnn


@pytest.mark.parametrize("batch", [4, 3])
def test_seed_cnn_equals_pytorch_at_two_batch_sizes(cnn, batch):
    model, ex = cnn
    x = torch.randn(batch, 1, 28, 28)
    got = run_poisoned(ex, x.numpy())
    with torch.no_grad():
        ref = model(x).numpy()
    assert got.shape == (batch, 10)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_seed_cnn_accepts_torch_tensors_and_profiles(cnn, capsys):
    model, ex = cnn
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        np.testing.assert_allclose(ex(x), model(x).numpy(), rtol=1e-5, atol=1e-5)
    table = ex.profile(x, repeat=1)
    assert "model_k0_conv2d" in table and "total" in table
    assert ex.benchmark(x, repeat=2, warmup=1) > 0


def test_seed_cnn_is_fused_and_one_library(cnn):
    _, ex = cnn
    text = str(ex.graph)
    # the convolution (one input channel), its bias and relu and the max-pool are one kernel
    # (the convolution's output is never written); each dense layer (narrow weights) is one kernel with its bias (and relu) applied as its
    # register tiles are stored
    assert [s.entry for s in ex.segments] == ["model"]
    assert list(ex.segments[0].labels) == [
        "model_k0_conv2d_pool", "model_k2_linear", "model_k3_linear", "model_k4_softmax"]
    fused = text.split("kernel model_k0_conv2d_pool")[1].split("kernel")[0]
    assert "relu(%convolution)" in fused and "max_pool2d(%relu" in fused
    fc1 = text.split("kernel model_k2_linear(")[1].split("kernel")[0]
    assert "linear(%view" in fc1 and "return %relu_1\n" in fc1


def test_wrong_input_shape_is_an_argument_error(cnn):
    _, ex = cnn
    with pytest.raises(pl.ArgumentError, match="input 'x'"):
        ex(np.zeros((2, 1, 27, 28), "float32"))
    with pytest.raises(pl.ArgumentError, match="dtype float32"):
        ex(np.zeros((2, 1, 28, 28), "float64"))


def test_resnet_basic_block_folds_batch_norm():
    torch.manual_seed(1)
    model = BasicBlock(8).eval()
    x = torch.randn(2, 8, 10, 10)
    g = pl.graph.from_torch(model, (x,))
    opt = pl.graph.optimize(g)
    assert "= batch_norm(" not in str(opt) and "w_folded" in str(opt)
    got = run_poisoned(pl.graph.build(g), x.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_transformer_encoder_layer():
    torch.manual_seed(2)
    model = encoder_layer().eval()
    x = torch.randn(2, 5, 16)
    got = run_poisoned(pl.graph.build(pl.graph.from_torch(model, (x,))), x.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)


class _Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.special.i0(torch.sort(x, dim=1).values) + torch.special.i1(x)


def test_unsupported_operators_are_listed_at_once_by_build():
    g = pl.graph.from_torch(_Unsupported(), (torch.randn(2, 3),))
    with pytest.raises(pl.PolyloopError) as e:
        pl.graph.build(g)
    msg = str(e.value)
    assert "3 unsupported" in msg
    for op in ("i0", "sort", "i1"):
        assert op in msg
    assert "register_extern" in msg and "fallback='torch'" in msg


def test_extern_routed_conv():
    torch.manual_seed(3)
    model = SeedCNN().eval()
    x = torch.randn(2, 1, 28, 28)
    calls = []

    def conv(data, weight, bias, *, stride, padding, dilation, groups):
        calls.append(data.shape)
        out = torch.nn.functional.conv2d(torch.from_numpy(data), torch.from_numpy(weight),
                                         torch.from_numpy(bias), stride, padding, dilation,
                                         groups)
        return out.numpy()
    pl.graph.register_extern("env.conv2d", conv)
    try:
        ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    finally:
        pl.graph.register_extern("env.conv2d", None)
    assert "call_extern 'env.conv2d'" in str(ex.graph)
    got = run_poisoned(ex, x.numpy())
    assert calls == [(2, 1, 28, 28)]
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(pl.PolyloopError, match="extern"):
        ex.export_library("unused.so")


def test_rebuilding_a_model_loads_it_from_the_cache(cnn):
    from polyloop.runtime.compiler import STATS
    model, first = cnn
    compiles = STATS.compiles
    g = pl.graph.from_torch(model, (torch.randn(4, 1, 28, 28),), batch="batch")
    again = pl.graph.build(g)
    assert STATS.compiles == compiles and again.library.path == first.library.path
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype("float32")
    np.testing.assert_array_equal(again(x), first(x))


class Repeated(torch.nn.Module):
    """Three equal blocks (convolution, batch norm, ReLU) with weights of their own."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(*[torch.nn.Sequential(
            torch.nn.Conv2d(6, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU())
            for _ in range(3)])

    def forward(self, x):
        return self.blocks(x)


def test_equal_layers_share_one_compiled_kernel():
    torch.manual_seed(3)
    model = Repeated().eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 6, 9, 9)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    steps = [s for seg in ex.segments for s in seg.steps]
    assert len(steps) == 3 and len({s.function for s in steps}) == 1
    with torch.no_grad():
        np.testing.assert_allclose(run_poisoned(ex, x.numpy()), model(x).numpy(),
                                   rtol=1e-5, atol=1e-5)


class Twice(torch.nn.Module):
    """One convolution applied twice: its weights and bias shared by two calls."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(6, 6, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.relu(self.conv(x)))


def test_a_convolution_called_twice_shares_its_constants():
    torch.manual_seed(4)
    model = Twice().eval()
    x = torch.randn(2, 6, 9, 9)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    with torch.no_grad():
        np.testing.assert_allclose(run_poisoned(ex, x.numpy()), model(x).numpy(),
                                   rtol=1e-5, atol=1e-5)
