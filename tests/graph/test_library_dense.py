# SPDX-License-Identifier: Apache-2.0
"""Dense layers of an imported model run polyloop.ops' matmul recipe on weights packed once at
build time (column panels, the last one part-empty), and equal PyTorch: a 3-D input as BERT's,
a 2-D one with a symbolic batch, weights shared by two layers, NaN-poisoned outputs. Narrow
layers keep their weights as stored."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")
nn = torch.nn


class Tokens(nn.Module):
    """(1, 37, 48) -> 100 -> GELU -> 100 (the same layer twice: shared weights) -> 70."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(48, 100)
        self.mid = nn.Linear(100, 100)
        self.out = nn.Linear(100, 70, bias=False)

    def forward(self, x):
        y = self.mid(torch.nn.functional.gelu(self.up(x)))
        return self.out(self.mid(torch.relu(y)))


class Rows(nn.Module):
    """(batch, 48) -> 600 -> ReLU -> 20: the first layer is wide (packed), the second narrow."""

    def __init__(self) -> None:
        super().__init__()
        self.wide = nn.Linear(48, 600)
        self.narrow = nn.Linear(600, 20)

    def forward(self, x):
        return self.narrow(torch.relu(self.wide(x)))


def dense_products(ex):
    return [b for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall)
            and b.kernel.body[0].op is pl.graph.Op.MATMUL]


@pytest.fixture(scope="module")
def tokens():
    torch.manual_seed(5)
    model = Tokens().eval()
    return model, pl.graph.build(pl.graph.from_torch(model, (torch.randn(1, 37, 48),)))


@pytest.fixture(scope="module")
def rows():
    torch.manual_seed(6)
    model = Rows().eval()
    g = pl.graph.from_torch(model, (torch.randn(3, 48),), batch="batch")
    return model, pl.graph.build(g)


def test_tokens_model_equals_pytorch(tokens):
    model, ex = tokens
    x = torch.randn(1, 37, 48)
    out = np.full((1, 37, 70), np.nan, np.float32)
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_tokens_products_read_packed_constants_made_once(tokens):
    model, ex = tokens
    products = dense_products(ex)
    assert len(products) == 4
    consts = {c.value.name: c for c in ex.graph.constants}
    for kc in products:
        w = kc.inputs[1]
        assert w.name.endswith("_packed") and len(w.type.shape) == 3, kc.kernel.name
        assert kc.kernel.body[0].attr("columns") == kc.outputs[0].type.shape[-1]
        assert w.name in consts
    packed = {name for name in consts if name.endswith("_packed")}
    assert packed == {kc.inputs[1].name for kc in products} and len(packed) == 3
    # the packed constant holds the layer's weights, panel by panel
    mid = model.mid.weight.detach().numpy().T          # (in, out)
    (name,) = [kc.inputs[1].name for kc in products
               if kc.outputs[0].type.shape[-1] == 100 and kc.inputs[0].type.shape[-1] == 100][:1]
    np.testing.assert_array_equal(consts[name].data,
                                  pl.ops.pack_matmul_weight(mid, pl.ops.matmul_panel_width()))


@pytest.mark.parametrize("batch", [3, 1, 7])
def test_rows_model_symbolic_batch_equals_pytorch(rows, batch):
    model, ex = rows
    x = torch.randn(batch, 48)
    out = np.full((batch, 20), np.nan, np.float32)
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_narrow_layer_keeps_its_weights_unpacked(rows):
    _, ex = rows
    products = dense_products(ex)
    assert len(products) == 1                    # the wide layer: the library's product
    assert len(products[0].inputs[1].type.shape) == 3
    assert products[0].outputs[0].type.shape[-1] == 600
    packed = [c for c in ex.graph.constants if c.value.name.endswith("_packed")]
    assert len(packed) == 1 and packed[0].data.shape[1] == 48


class TwoHeads(nn.Module):
    """Two dense layers on one (1, 37, 48) input, as attention's query and key."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(48, 100)
        self.k = nn.Linear(48, 100)

    def forward(self, x):
        return self.q(x) * self.k(x)


def test_two_layers_on_one_input_share_its_matrix_view():
    torch.manual_seed(7)
    model = TwoHeads().eval()
    x = torch.randn(1, 37, 48)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    views = [b for b in ex.graph.bindings if isinstance(b, pl.graph.Call)
             and b.op is pl.graph.Op.RESHAPE and b.inputs[0].name == "x"]
    assert len(views) == 1 and len(dense_products(ex)) == 2
    out = np.full((1, 37, 100), np.nan, np.float32)
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-4, atol=1e-4)
