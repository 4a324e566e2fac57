# SPDX-License-Identifier: Apache-2.0
"""On a constant batch of at least four vectors of images, a small CNN's conv + pool kernel,
the flatten and the dense layer after it become one kernel (graph.passes.fuse_conv_pool_dense)
run by polyloop.ops' batch-last recipe, equal to PyTorch; fewer images, a batch that would
leave many lanes idle, a symbolic batch and a flatten read twice keep the kernels apart."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes import conv_pool_dense_schedule
from polyloop.ops.knobs import default_lanes

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn

from .models import SeedCNN  # noqa: E402 - after the skip
from .test_from_torch import assert_matches_torch, run_poisoned  # noqa: E402


def merged(g):
    return [b for b in g.bindings
            if isinstance(b, pl.graph.KernelCall) and conv_pool_dense_schedule(b) is not None]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(1)
    return SeedCNN().eval()


def test_seed_cnn_on_a_batch_of_vectors_runs_one_head_kernel(model):
    lanes = default_lanes()
    batch = 4 * lanes
    x = torch.randn(batch, 1, 28, 28)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    heads = merged(ex.graph)
    assert [kc.kernel.name for kc in heads] == ["model_k0_conv2d_pool_linear"]
    assert [str(c.op) for c in heads[0].kernel.body] == \
        ["conv2d", "add", "relu", "max_pool2d", "reshape", "matmul", "add", "relu"]
    # the pooled features never leave the kernel
    assert all(v.type.shape != (batch, 32, 13, 13) for b in ex.graph.bindings
               for v in b.outputs)
    assert_matches_torch(ex, model, x)


@pytest.mark.parametrize("batch", [3, 17, 2 * default_lanes()])
def test_few_images_or_idle_lanes_keep_the_kernels_apart(model, batch):
    x = torch.randn(batch, 1, 28, 28)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    assert merged(ex.graph) == []
    assert_matches_torch(ex, model, x)


def test_symbolic_batch_keeps_the_kernels_apart(seed_cnn):
    _, ex = seed_cnn
    assert merged(ex.graph) == []


class NoBiases(nn.Module):
    """A convolution and a dense layer without biases, no ReLU after the dense layer, a
    pool of 3 and padding."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(1, 6, 3, padding=1, bias=False)
        self.fc = nn.Linear(6 * 4 * 4, 9, bias=False)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.c(x)), 3)
        return self.fc(torch.flatten(y, 1))


def test_no_biases_no_relu(rng):
    torch.manual_seed(2)
    model = NoBiases().eval()
    batch = 4 * default_lanes() - 1                  # the last vector of images one short
    x = torch.from_numpy(rng.standard_normal((batch, 1, 13, 14), dtype=np.float32))
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    heads = merged(ex.graph)
    assert len(heads) == 1
    assert [str(c.op) for c in heads[0].kernel.body][4:] == ["reshape", "matmul"]
    with torch.no_grad():
        expected = model(x).numpy()
    assert (expected < 0).any()
    np.testing.assert_allclose(run_poisoned(ex, x.numpy()), expected, rtol=1e-5, atol=1e-5)


class FlattenReadTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        f = torch.flatten(nn.functional.max_pool2d(torch.relu(self.c(x)), 2), 1)
        return self.fc(f), f


def test_a_flatten_read_twice_is_not_merged():
    torch.manual_seed(3)
    model = FlattenReadTwice().eval()
    x = torch.randn(4 * default_lanes(), 1, 8, 8)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    assert merged(ex.graph) == []
    with torch.no_grad():
        for got, want in zip(run_poisoned(ex, x.numpy()), model(x)):
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


class FlattenRows(nn.Module):
    """The pooled maps flattened per channel, (B * K, H * W), then a dense layer: not the
    flatten of a CNN's head."""

    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(3 * 3, 4)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.c(x)), 2)
        return self.fc(y.reshape(-1, 9))


def test_a_flatten_of_other_axes_is_not_merged():
    torch.manual_seed(7)
    model = FlattenRows().eval()
    x = torch.randn(2 * default_lanes(), 1, 8, 8)      # B * K rows: four vectors of them
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    assert merged(ex.graph) == []
    assert_matches_torch(ex, model, x)
