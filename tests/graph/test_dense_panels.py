# SPDX-License-Identifier: Apache-2.0
"""Dense layers on a few rows (one, three) with constant weights read them in panels of the
register tile's width, packed at build time, the last panel part-empty; they equal PyTorch on
NaN-poisoned outputs. A layer whose columns fit in one tile keeps its weights as stored."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes.dense_panels import panel_columns

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn


class Head(nn.Module):
    """70 -> (wide) -> ReLU -> 80 -> ReLU -> (wide, no bias): the wide layers span more than
    one tile's columns whatever the vector width; 80 columns do on three rows. Every layer
    has at least 64 columns and under 256 KB of weights (``dense_split`` runs others)."""

    def __init__(self, wide: int) -> None:
        super().__init__()
        self.a = nn.Linear(70, wide)
        self.b = nn.Linear(wide, 80)
        self.c = nn.Linear(80, wide + 3, bias=False)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


@pytest.mark.parametrize("rows", [1, 3])
def test_few_rows_on_panels_equal_pytorch(rows):
    torch.manual_seed(rows)
    wide = 4 * (panel_columns(rows, 10 ** 6, "float32") or 0) // 3 + 69   # > 1.33 tiles
    net = Head(wide).eval()
    x = torch.randn(rows, 70)
    ex = pl.graph.build(pl.graph.from_torch(net, (x,)))
    panels = {c.value.name: c.data.shape for c in ex.graph.constants
              if "_panels" in c.value.name}
    want = []
    for depth, cols in ((70, wide), (wide, 80), (80, wide + 3)):
        width = panel_columns(rows, cols, "float32")
        if width is not None:
            want.append((-(-cols // width), depth, width))
    assert len(want) >= 2 and sorted(panels.values()) == sorted(want), panels
    for _ in range(2):                      # fresh data each call
        x = torch.randn(rows, 70)
        out = np.full((rows, wide + 3), np.nan, "float32")
        ex(x.numpy(), out=(out,))
        with torch.no_grad():
            np.testing.assert_allclose(out, net(x).numpy(), rtol=1e-4, atol=1e-5)


def test_panel_columns_rule():
    lanes = 16 * (panel_columns(1, 10 ** 6, "float32") or 0) // 256   # the host's lanes
    assert panel_columns(1, 16 * lanes, "float32") is None          # one tile: as stored
    assert panel_columns(1, 16 * lanes + 1, "float32") == 16 * lanes
    assert panel_columns(2, 10 ** 6, "float32") == 8 * lanes
    assert panel_columns(8, 10 ** 6, "float32") == 2 * lanes
    assert panel_columns(17, 10 ** 6, "float32") is None            # many rows: matmul
    assert panel_columns("n", 10 ** 6, "float32") is None           # symbolic rows
