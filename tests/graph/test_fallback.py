# SPDX-License-Identifier: Apache-2.0
"""Imported calls with no lowering: refused all at once by default, or run through a reference
implementation inside the executor with ``build(fallback=...)``, never silently."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")

from .test_from_torch import run_poisoned  # noqa: E402


class SortThenScale(torch.nn.Module):
    """A compiled linear layer, a call with no lowering (sort, two results), compiled math."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(5, 6)

    def forward(self, x):
        y = torch.relu(self.fc(x))
        values, indices = torch.sort(y, dim=1)
        return values * 2.0 + torch.special.i0(y), indices


def test_import_keeps_unsupported_calls_as_typed_foreign_nodes():
    g = pl.graph.from_torch(SortThenScale().eval(), (torch.randn(3, 5),))
    foreign = [b for b in g.bindings if getattr(b, "op", None) is pl.graph.Op.FOREIGN]
    assert [b.attr("op") for b in foreign] == ["aten.sort.default", "aten.i0.default"]
    assert [str(v.type) for v in foreign[0].outputs] == ["float32[3, 6]", "int64[3, 6]"]
    assert "foreign(%relu" in str(g)


def test_torch_fallback_runs_inside_the_executor_and_is_reported(capsys):
    torch.manual_seed(0)
    model = SortThenScale().eval()
    x = torch.randn(3, 5)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)), fallback="torch")
    assert "2 operator call(s) run through the torch fallback" in capsys.readouterr().err
    got_values, got_indices = run_poisoned(ex, x.numpy())
    with torch.no_grad():
        values, indices = model(x)
    np.testing.assert_allclose(got_values, values.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_indices, indices.numpy())
    report = ex.report()
    assert "fallback  %sort, %sort_1 = aten.sort.default via torch" in report
    assert "2 fallback call(s)" in report and "kernel    model_k0_linear" in report


def test_numpy_fallback_runs_the_numpy_references():
    torch.manual_seed(1)
    model = SortThenScale().eval()
    x = torch.randn(4, 5)
    x[0, :] = 0.0                     # ties: kept in input order, as PyTorch's stable sort
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)), fallback="numpy")
    got_values, got_indices = run_poisoned(ex, x.numpy())
    with torch.no_grad():
        values, indices = model(x)
    np.testing.assert_allclose(got_values, values.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_indices, indices.numpy())
    assert "via numpy" in ex.report()


class Rearranged(torch.nn.Module):
    def forward(self, x):
        top = torch.topk(x, 3, dim=1)
        sort = torch.sort(torch.nan_to_num(x, nan=0.0) * 0.0 + x, dim=0, descending=True)
        return (top.values, torch.flip(x, (0, 2)), torch.roll(x, (1, -2), (1, 2)),
                torch.cumprod(x, 2), sort.values, sort.indices)


def test_numpy_references_equal_pytorch_with_nan_and_ties():
    x = torch.randn(3, 6, 4)
    x[1, 2, 0] = float("nan")
    x[2, :, 1] = 0.5
    ex = pl.graph.build(pl.graph.from_torch(Rearranged(), (x,)), fallback="numpy")
    with torch.no_grad():
        want = Rearranged()(x)
    for got, w in zip(ex(x.numpy()), want):    # NaN in, NaN out: not poisoned
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)


class Digamma(torch.nn.Module):
    def forward(self, x):
        return torch.digamma(x.abs() + 1.0)


def test_a_fallback_without_that_reference_is_refused_by_name():
    g = pl.graph.from_torch(Digamma(), (torch.randn(3, 5),))
    with pytest.raises(pl.PolyloopError, match="no numpy reference: try fallback='torch'"):
        pl.graph.build(g, fallback="numpy")
    with pytest.raises(pl.PolyloopError, match="use one of 'error', 'torch', 'numpy'"):
        pl.graph.build(g, fallback="python")
