# SPDX-License-Identifier: Apache-2.0
"""Pooling, row softmax and narrow dense layers against PyTorch: odd sizes, windows that
overlap or leave columns out, padding, a symbolic batch, outputs poisoned with NaN; and the
seed CNN at batch 1, 4 and 64, each built for its static batch."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.build import optimize
from polyloop.graph.lower import lower_kernel
from polyloop.graph.schedule import default_schedule, unpacked_dense, work

torch = pytest.importorskip("torch", reason="the operators are checked against PyTorch")
F = torch.nn.functional

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


# (name, op, attrs, reference on a torch tensor)
POOLS = [
    ("max_k2_s2", Op.MAX_POOL2D, dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0)),
     lambda x: F.max_pool2d(x, 2)),
    ("max_k2_s1", Op.MAX_POOL2D, dict(kernel=(2, 2), stride=(1, 1), padding=(0, 0)),
     lambda x: F.max_pool2d(x, 2, 1)),
    ("max_k3_s2_p1", Op.MAX_POOL2D, dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
     lambda x: F.max_pool2d(x, 3, 2, 1)),
    ("max_k3_s1_p1", Op.MAX_POOL2D, dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1)),
     lambda x: F.max_pool2d(x, 3, 1, 1)),
    ("max_k3x2_s2x1", Op.MAX_POOL2D, dict(kernel=(3, 2), stride=(2, 1), padding=(1, 0)),
     lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0))),
    ("avg_k2_s2", Op.AVG_POOL2D, dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0)),
     lambda x: F.avg_pool2d(x, 2)),
    ("avg_k3_s2_p1", Op.AVG_POOL2D, dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
     lambda x: F.avg_pool2d(x, 3, 2, 1)),
    ("avg_k3_s1_p1_excl", Op.AVG_POOL2D, dict(kernel=(3, 3), stride=(1, 1), padding=(1, 1),
                                              count_include_pad=False),
     lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)),
    ("adaptive_global", Op.ADAPTIVE_AVG_POOL2D, dict(output_size=(1, 1)),
     lambda x: F.adaptive_avg_pool2d(x, 1)),
    ("adaptive_1x11", Op.ADAPTIVE_AVG_POOL2D, dict(output_size=(1, 11)),
     lambda x: F.adaptive_avg_pool2d(x, (1, 11))),
]


@pytest.fixture(scope="module")
def pools():
    """One model: every pooling of ``relu(x)`` (x: n x 3 x 13 x 11: odd, windows that leave
    the last row out) and ResNet-18's max-pool on a 64 x 112 x 112 map."""
    b = pl.graph.GraphBuilder("pools")
    x = b.input("x", ("n", 3, 13, 11))
    big = b.input("big", (1, 64, 112, 112))
    r = b.emit(Op.RELU, x)
    outs = [b.emit(op, r, **attrs) for _, op, attrs, _ in POOLS]
    outs.append(b.emit(Op.MAX_POOL2D, big, kernel=(3, 3), stride=(2, 2), padding=(1, 1)))
    return pl.graph.build(b.build(*outs))


@pytest.mark.parametrize("batch", [1, 5])
def test_pooling_equals_pytorch(pools, batch):
    x, big = rand(batch, 3, 13, 11), rand(1, 64, 112, 112)
    refs = [ref(torch.relu(torch.from_numpy(x))) for *_, ref in POOLS]
    refs.append(F.max_pool2d(torch.from_numpy(big), 3, 2, 1))
    outs = tuple(np.full(tuple(r.shape), np.nan, "float32") for r in refs)
    pools(x, big, out=outs)
    for (name, *_), got, ref in zip([*POOLS, ("resnet_max",)], outs, refs):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_max_pooling_propagates_nan(pools):
    x = rand(1, 3, 13, 11)
    x[0, 1, 4, 6] = np.nan
    got = pools(x, rand(1, 64, 112, 112))[0]
    ref = F.max_pool2d(torch.relu(torch.from_numpy(x)), 2).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))


def _kernel_schedule(b: pl.graph.GraphBuilder, out) -> pl.Schedule:
    """The default schedule of the last kernel of the optimized graph."""
    g = optimize(b.build(out))
    return default_schedule(lower_kernel(g.bindings[-1].kernel))


def test_pool_rows_are_computed_per_output_row():
    b = pl.graph.GraphBuilder("p")
    x = b.input("x", (8, 32, 26, 26))
    text = str(_kernel_schedule(b, b.emit(Op.MAX_POOL2D, b.emit(Op.RELU, x), kernel=(2, 2),
                                          stride=(2, 2), padding=(0, 0))))
    # the rows of one output row, contiguous and vectorized, inside the parallel planes
    rows = text.index("max_pool2d_rows[")
    assert text.index("parallel(") < rows
    assert "vectorized(26)" in text[:rows]


def test_small_kernels_run_on_one_thread():
    b = pl.graph.GraphBuilder("s")
    x = b.input("x", (64, 10))
    small = str(_kernel_schedule(b, b.emit(Op.SOFTMAX, x, axis=1)))
    assert "parallel" not in small
    b = pl.graph.GraphBuilder("s")
    x = b.input("x", (64, 1000))
    assert "parallel" in str(_kernel_schedule(b, b.emit(Op.SOFTMAX, x, axis=1)))
    b = pl.graph.GraphBuilder("s")
    x = b.input("x", ("n", 10))    # a symbolic size may be large: one loop over the rows
    assert str(_kernel_schedule(b, b.emit(Op.SOFTMAX, x, axis=1))).count("parallel(") == 1
    k = pl.reduce_axis((0, 3), name="k")
    a = pl.placeholder((5, 3), "float32", name="a")
    assert work([pl.compute((5,), lambda i: pl.sum(a[i, k], axis=k), name="s")]) == 15


@pytest.fixture(scope="module")
def rows_model():
    """Softmax and log-softmax of 10-class rows (a batch of 64 and a symbolic one)."""
    b = pl.graph.GraphBuilder("rows")
    x = b.input("x", (64, 10))
    y = b.input("y", ("n", 10))
    t = b.input("t", ("n", 10, 3))
    return pl.graph.build(b.build(b.emit(Op.SOFTMAX, x, axis=1),
                                  b.emit(Op.LOG_SOFTMAX, x, axis=-1),
                                  b.emit(Op.SOFTMAX, y, axis=1),
                                  b.emit(Op.SOFTMAX, t, axis=1)))


@pytest.mark.parametrize("n", [1, 7])
def test_softmax_rows_equal_pytorch(rows_model, n):
    x, y, t = rand(64, 10) * 4, rand(n, 10) * 4, rand(n, 10, 3)
    refs = [F.softmax(torch.from_numpy(x), 1), F.log_softmax(torch.from_numpy(x), -1),
            F.softmax(torch.from_numpy(y), 1), F.softmax(torch.from_numpy(t), 1)]
    outs = tuple(np.full(tuple(r.shape), np.nan, "float32") for r in refs)
    rows_model(x, y, t, out=outs)
    for k, (got, ref) in enumerate(zip(outs, refs)):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-5, atol=1e-6, err_msg=str(k))


@pytest.fixture(scope="module")
def dense_model():
    """Dense layers the default schedule runs on the stored weights: 50 -> 37 (+ bias, relu)
    on a symbolic batch, 37 -> 5 (no bias) and 50 -> 600 on 3 rows (a packed copy would
    cost more than the product)."""
    torch.manual_seed(3)
    fc1, fc2, wide = torch.nn.Linear(50, 37), torch.nn.Linear(37, 5, bias=False), \
        torch.nn.Linear(50, 600)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = fc1, fc2

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    class Wide(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = wide

        def forward(self, x):
            return torch.sigmoid(self.wide(x))
    net, wide_net = Net().eval(), Wide().eval()
    g = pl.graph.from_torch(net, (torch.randn(4, 50),), batch="batch")
    g_wide = pl.graph.from_torch(wide_net, (torch.randn(3, 50),))
    return (net, pl.graph.build(g)), (wide_net, pl.graph.build(g_wide))


@pytest.mark.parametrize("batch", [1, 9, 20])
def test_dense_layers_equal_pytorch(dense_model, batch):
    (net, ex), _ = dense_model
    x = torch.randn(batch, 50)
    out = np.full((batch, 5), np.nan, "float32")
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, net(x).numpy(), rtol=1e-5, atol=1e-5)
    assert not any(label.endswith("_ops") for label in ex.segments[0].labels)


def test_wide_dense_on_few_rows_equals_pytorch(dense_model):
    _, (net, ex) = dense_model
    x = torch.randn(3, 50)
    out = np.full((3, 600), np.nan, "float32")
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, net(x).numpy(), rtol=1e-5, atol=1e-6)
    assert unpacked_dense(3, 600) and not unpacked_dense("n", 600)


@pytest.mark.parametrize("batch", [1, 4, 64])
def test_seed_cnn_at_static_batch_equals_pytorch(batch):
    from .models import SeedCNN
    torch.manual_seed(batch)
    model = SeedCNN().eval()
    x = torch.randn(batch, 1, 28, 28)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)))
    out = np.full((batch, 10), np.nan, "float32")
    ex(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(pl.ArgumentError, match="input 'x'"):
        ex(np.zeros((batch + 1, 1, 28, 28), "float32"))
