# SPDX-License-Identifier: Apache-2.0
"""The operator library against PyTorch: one hand-written graph with every operator (built
once), awkward sizes, a symbolic batch, outputs poisoned with NaN."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op

torch = pytest.importorskip("torch", reason="the operators are checked against PyTorch")
F = torch.nn.functional

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


W = {"w_s2": rand(5, 3, 3, 3), "b_s2": rand(5), "w_g": rand(4, 3, 2, 3), "w_dw": rand(6, 1, 3, 3),
     "w_1x1": rand(6, 3, 1, 1), "gamma": rand(7), "beta": rand(7), "mm": rand(7, 5),
     "emb": rand(11, 4), "ln2_g": rand(5, 7), "ln2_b": rand(5, 7), "scale": rand(3, 1, 1)}


def build_graph():
    """``x: (n, 3, 9, 7)``, ``t: (n, 5, 7)``, ``idx: (n, 4)``; one output per case."""
    b = pl.graph.GraphBuilder("ops")
    x = b.input("x", ("n", 3, 9, 7))
    t = b.input("t", ("n", 5, 7))
    idx = b.input("idx", ("n", 4), "int64")
    c = {k: b.constant(v, k) for k, v in W.items()}
    conv = dict(dilation=(1, 1), groups=1)
    outs = {
        "conv_s2": b.emit(Op.CONV2D, x, c["w_s2"], c["b_s2"], stride=(2, 2), padding=(1, 0),
                          **conv),
        "conv_dil_groups": b.emit(Op.CONV2D, b.emit(Op.CONCAT, x, x, axis=1), c["w_g"],
                                  stride=(1, 1), padding=(2, 1), dilation=(2, 1), groups=2),
        "conv_dw": b.emit(Op.CONV2D, b.emit(Op.CONV2D, x, c["w_1x1"], stride=(1, 1),
                                            padding=(0, 0), **conv), c["w_dw"],
                          stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=6),
        "avg_pad": b.emit(Op.AVG_POOL2D, x, kernel=(3, 2), stride=(2, 2), padding=(1, 1),
                          count_include_pad=False),
        "avg_incl": b.emit(Op.AVG_POOL2D, x, kernel=(3, 3), stride=(1, 2), padding=(1, 1)),
        "max_pad": b.emit(Op.MAX_POOL2D, x, kernel=(3, 3), stride=(2, 2), padding=(1, 1)),
        "adaptive": b.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=(3, 1)),
        "bcast": b.emit(Op.DIV, b.emit(Op.SUB, x, c["scale"]), b.emit(Op.ADD, c["scale"],
                                                                     b.constant(np.float32(4)))),
        "unary": b.emit(Op.MUL, b.emit(Op.SIGMOID, t), b.emit(Op.TANH, b.emit(Op.GELU, t))),
        "gelu_tanh": b.emit(Op.GELU_TANH, t),
        "log_softmax": b.emit(Op.LOG_SOFTMAX, t, axis=1),
        "mean": b.emit(Op.MEAN, x, axes=[2, 3], keepdim=True),
        "layer_norm": b.emit(Op.LAYER_NORM, t, c["ln2_g"], c["ln2_b"], ndims=2, eps=1e-5),
        "matmul_bcast": b.emit(Op.MATMUL, t, c["mm"]),
        "bmm": b.emit(Op.MATMUL, t, b.emit(Op.PERMUTE, t, axes=[0, 2, 1])),
        "embedding": b.emit(Op.EMBEDDING, c["emb"], idx),
        "attention": b.emit(Op.ATTENTION, t, t, t, causal=True),
        "select": b.emit(Op.SELECT, x, axis=2, index=4),
    }
    return b.build(*outs.values()), list(outs)


def reference(x, t, idx):
    w = {k: torch.from_numpy(v) for k, v in W.items()}
    x, t = torch.from_numpy(x), torch.from_numpy(t)
    return {
        "conv_s2": F.conv2d(x, w["w_s2"], w["b_s2"], stride=2, padding=(1, 0)),
        "conv_dil_groups": F.conv2d(torch.cat([x, x], 1), w["w_g"], padding=(2, 1),
                                    dilation=(2, 1), groups=2),
        "conv_dw": F.conv2d(F.conv2d(x, w["w_1x1"]), w["w_dw"], padding=1, groups=6),
        "avg_pad": F.avg_pool2d(x, (3, 2), 2, 1, count_include_pad=False),
        "avg_incl": F.avg_pool2d(x, 3, (1, 2), 1),
        "max_pad": F.max_pool2d(x, 3, 2, 1),
        "adaptive": F.adaptive_avg_pool2d(x, (3, 1)),
        "bcast": (x - w["scale"]) / (w["scale"] + 4),
        "unary": torch.sigmoid(t) * torch.tanh(F.gelu(t)),
        "gelu_tanh": F.gelu(t, approximate="tanh"),
        "log_softmax": F.log_softmax(t, 1),
        "mean": x.mean((2, 3), keepdim=True),
        "layer_norm": F.layer_norm(t, (5, 7), w["ln2_g"], w["ln2_b"]),
        "matmul_bcast": t @ w["mm"],
        "bmm": t @ t.transpose(1, 2),
        "embedding": F.embedding(torch.from_numpy(idx), w["emb"]),
        "attention": F.scaled_dot_product_attention(t, t, t, is_causal=True),
        "select": x[:, :, 4],
    }


@pytest.fixture(scope="module")
def ops_model():
    g, names = build_graph()
    return pl.graph.build(g), names


@pytest.mark.parametrize("batch", [1, 3])
def test_every_operator_equals_pytorch(ops_model, batch):
    ex, names = ops_model
    x, t = rand(batch, 3, 9, 7), rand(batch, 5, 7)
    idx = RNG.integers(0, 11, size=(batch, 4))
    ref = reference(x, t, idx)
    outs = tuple(np.full(tuple(ref[k].shape), np.nan, "float32") for k in names)
    ex(x, t, idx, out=outs)
    for name, got in zip(names, outs):
        np.testing.assert_allclose(got, ref[name].numpy(), rtol=1e-5, atol=2e-5,
                                   err_msg=name)


def test_embedding_index_out_of_range_is_refused(ops_model):
    ex, _ = ops_model
    with pytest.raises(pl.ArgumentError, match="embedding indices"):
        ex(rand(1, 3, 9, 7), rand(1, 5, 7), np.array([[0, 1, 11, 2]]))


def test_shape_errors_name_the_operator():
    b = pl.graph.GraphBuilder("bad")
    x = b.input("x", ("n", 3))
    with pytest.raises(pl.PolyloopError, match=r"add\(float32\[n, 3\], float32\[4\]\)"):
        b.emit(Op.ADD, x, b.constant(np.ones(4, "float32")))
