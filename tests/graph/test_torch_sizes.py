# SPDX-License-Identifier: Apache-2.0
"""Symbolic sizes through ``from_torch(dynamic=...)``: one build runs at every size the model
allows, 1 included, and refuses, naming the size, one it does not (a longer sequence than a
table holds, a size of 1 where the model's code takes another path)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")

from .test_from_torch import run_poisoned  # noqa: E402


class Positions(torch.nn.Module):
    """Adds the first ``seq`` rows of a table of 16 positions, then a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(16, 8))
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(x + self.table[: x.shape[1]]).softmax(-1)


class OneIsSpecial(torch.nn.Module):
    """Takes another path for a batch of one."""

    def forward(self, x):
        return x * 3.0 if x.shape[0] == 1 else x * 2.0


@pytest.fixture(scope="module")
def positions():
    torch.manual_seed(0)
    model = Positions().eval()
    g = pl.graph.from_torch(model, (torch.randn(2, 5, 8),),
                            dynamic={"x": {0: "batch", 1: "seq"}})
    return model, pl.graph.build(g)


@pytest.mark.parametrize("batch, seq", [(1, 1), (1, 7), (3, 1), (4, 16)])
def test_one_build_runs_at_every_batch_and_length_one_included(positions, batch, seq):
    model, ex = positions
    x = torch.randn(batch, seq, 8)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(run_poisoned(ex, x.numpy()), want, rtol=1e-5, atol=1e-6)


def test_a_length_beyond_the_table_is_refused_by_name(positions):
    _, ex = positions
    assert "seq <= 16" in str([str(r) for r in ex.graph.size_rules])
    with pytest.raises(pl.ArgumentError, match="seq = 17"):
        ex(np.zeros((2, 17, 8), "float32"))


def test_a_size_of_one_the_model_branches_on_is_refused():
    g = pl.graph.from_torch(OneIsSpecial(), (torch.randn(2, 3),), dynamic={"x": {0: "n"}})
    ex = pl.graph.build(g)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype("float32")
    np.testing.assert_array_equal(ex(x), x * 2.0)
    with pytest.raises(pl.ArgumentError, match="n = 1"):
        ex(np.zeros((1, 3), "float32"))


def test_dynamic_names_an_input_and_its_dimensions():
    with pytest.raises(pl.PolyloopError, match="'y' is not a tensor input"):
        pl.graph.from_torch(OneIsSpecial(), (torch.randn(2, 3),), dynamic={"y": {0: "n"}})
    with pytest.raises(pl.PolyloopError, match="2 dimensions, 5 is not one of them"):
        pl.graph.from_torch(OneIsSpecial(), (torch.randn(2, 3),), dynamic={"x": {5: "n"}})
    with pytest.raises(pl.PolyloopError, match="not an identifier"):
        pl.graph.from_torch(OneIsSpecial(), (torch.randn(2, 3),), dynamic={"x": {0: "n m"}})
