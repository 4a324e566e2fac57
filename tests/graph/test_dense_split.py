# SPDX-License-Identifier: Apache-2.0
"""Dense layers of a few rows on large weights (the reduction split between threads) and narrow
dense layers (rows widened to whole vectors) run polyloop.ops.dense_split_k and equal PyTorch;
a symbolic batch keeps the general dense schedule."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.graph.passes import dense_split_schedule
from polyloop.graph.passes.dense_split import _slices

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn

from .test_from_torch import assert_matches_torch  # noqa: E402 - after the skip


def routed(ex):
    return [b.kernel.name for b in ex.graph.bindings
            if isinstance(b, pl.graph.KernelCall) and dense_split_schedule(b) is not None]


@pytest.mark.parametrize("rows", [1, 3])
def test_few_rows_on_large_weights_split_the_reduction(rows):
    if _slices(1024) < 2:
        pytest.skip("one thread: the reduction is not split")
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(1024, 70), nn.ReLU(), nn.Linear(70, 5)).eval()
    x = torch.randn(rows, 1024)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    # the first layer splits its reduction, the narrow second one (5 columns) is one slice
    assert routed(ex) == ["model_k0_linear", "model_k1_linear"]
    assert_matches_torch(ex, model, x)


def test_narrow_layer_on_many_rows():
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(100, 10), nn.ReLU()).eval()
    x = torch.randn(37, 100)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    assert routed(ex) == ["model_k0_linear"]
    assert_matches_torch(ex, model, x)


def test_symbolic_batch_keeps_the_general_schedule(seed_cnn):
    _, ex = seed_cnn
    assert routed(ex) == []
