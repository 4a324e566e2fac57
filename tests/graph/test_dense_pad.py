# SPDX-License-Identifier: Apache-2.0
"""Dense layers that dense_split_k runs, on constant weights whose columns are not whole
vectors, read a copy padded with zero columns (graph.passes.pad_dense_columns) and equal
PyTorch; whole-vector columns and other dense layers keep their weights as stored."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.graph.passes import dense_split_schedule
from polyloop.graph.passes.dense_split import _slices
from polyloop.ops.knobs import default_lanes

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn

from .test_from_torch import assert_matches_torch  # noqa: E402 - after the skip


def padded(g):
    """name -> (calls, its weights' shape) of each kernel reading padded weights."""
    return {b.kernel.name: ([str(c.op) for c in b.kernel.body],
                            b.kernel.body[0].inputs[1].type.shape)
            for b in g.bindings if isinstance(b, pl.graph.KernelCall)
            and len(b.kernel.body[0].inputs) > 1
            and b.kernel.body[0].inputs[1].name.endswith("_wide")}


@pytest.mark.parametrize("rows", [1, 4])
def test_streamed_and_narrow_layers_read_padded_weights(rows):
    lanes = default_lanes()
    torch.manual_seed(6)
    # 3 + whole vectors of columns, then 5 columns; the middle layer has whole vectors
    model = nn.Sequential(nn.Linear(1024, 2 * lanes + 3), nn.ReLU(),
                          nn.Linear(2 * lanes + 3, 2 * lanes), nn.Linear(2 * lanes, 5)).eval()
    x = torch.randn(rows, 1024)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    wide = padded(ex.graph)
    expected = {"model_k2_linear": (["matmul", "add"], (1, 2 * lanes, lanes))}
    if _slices(1024) >= 2:
        expected["model_k0_linear"] = (["matmul", "add", "relu"], (1, 1024, 3 * lanes))
    assert wide == expected
    assert all(dense_split_schedule(b) is not None for b in ex.graph.bindings
               if isinstance(b, pl.graph.KernelCall) and b.kernel.name in wide)
    assert_matches_torch(ex, model, x)


def test_seed_cnn_at_batch_4(seed_cnn):
    model, _ = seed_cnn
    x = torch.randn(4, 1, 28, 28)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    wide = padded(ex.graph)
    assert wide["model_k3_linear"] == (["matmul", "add"], (1, 100, -(-10 // default_lanes())
                                                           * default_lanes()))
    if _slices(5408) >= 2:
        assert wide["model_k2_linear"][0] == ["matmul", "add", "relu"]
    assert_matches_torch(ex, model, x)
