# SPDX-License-Identifier: Apache-2.0
"""Dense layers on a few rows (one, three) with constant weights of at least 256 KB read them
in panels of the register tile's width, packed at build time, the last panel part-empty; they
equal PyTorch on NaN-poisoned outputs. Small weights, and layers whose columns fit in one
tile, keep them as stored."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.passes.dense_panels import panel_columns

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn


class Head(nn.Module):
    """120 -> 600 -> ReLU -> 150 -> ReLU -> 603 (no bias): the first and last layers' weights
    (288 and 362 KB) span several tiles' columns whatever the vector width, too many for
    ``dense_split``'s register tiles."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(120, 600)
        self.b = nn.Linear(600, 150)
        self.c = nn.Linear(150, 603, bias=False)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


@pytest.mark.parametrize("rows", [1, 3])
def test_few_rows_on_panels_equal_pytorch(rows):
    torch.manual_seed(rows)
    net = Head().eval()
    ex = pl.graph.build(pl.graph.from_torch(net, (torch.randn(rows, 120),)))
    panels = {c.data.shape for c in ex.graph.constants if "_panels" in c.value.name}
    for depth, cols in ((120, 600), (150, 603)):
        width = panel_columns(rows, cols, depth, "float32")
        assert (-(-cols // width), depth, width) in panels, panels
    for _ in range(2):                      # fresh data each call
        x = torch.randn(rows, 120)
        out = np.full((rows, 603), np.nan, "float32")
        ex(x.numpy(), out=(out,))
        with torch.no_grad():
            np.testing.assert_allclose(out, net(x).numpy(), rtol=1e-4, atol=1e-5)


def test_panel_columns_rule():
    lanes = panel_columns(1, 10 ** 6, 64, "float32") // 16          # the host's lanes
    assert panel_columns(1, 16 * lanes, 10 ** 4, "float32") is None   # one tile: as stored
    assert panel_columns(1, 16 * lanes + 1, 10 ** 4, "float32") == 16 * lanes
    assert panel_columns(2, 10 ** 6, 64, "float32") == 8 * lanes
    assert panel_columns(8, 10 ** 6, 64, "float32") == 2 * lanes
    assert panel_columns(3, 40, 40, "float32") is None               # 6.4 KB of weights
    assert panel_columns(17, 10 ** 6, 64, "float32") is None         # many rows: matmul
    assert panel_columns("n", 10 ** 6, 64, "float32") is None        # symbolic rows
