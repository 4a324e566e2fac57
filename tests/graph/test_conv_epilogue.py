# SPDX-License-Identifier: Apache-2.0
"""passes.fold_conv_epilogues: a library convolution takes back the elementwise kernel after
it when that kernel is its result's only reader; the part of an epilogue a pooling took stays
in the pooling. Results against PyTorch on NaN-poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional (extra 'graph')")
F = torch.nn.functional


def _conv(b, x, w, bias, stride):
    return b.emit(Op.CONV2D, x, w, bias, stride=(stride, stride), padding=(1, 1),
                  dilation=(1, 1), groups=1)


def _run(g, x, shape):
    ex = pl.graph.build(g)
    outs = tuple(np.full(s, np.nan, np.float32) for s in shape)
    ex(x, out=outs)
    return ex, outs


@pytest.mark.parametrize("stride", [1, 2])
def test_bias_residual_relu_fold_into_the_conv(rng, stride):
    x = rng.standard_normal((1, 5, 13, 11), dtype=np.float32)
    w = rng.standard_normal((19, 5, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(19, dtype=np.float32)
    oh, ow = (13 - 1) // stride + 1, (11 - 1) // stride + 1
    res = rng.standard_normal((1, 19, oh, ow), dtype=np.float32)
    b = pl.graph.GraphBuilder("f")
    xv, rv = b.input("x", x.shape), b.input("res", res.shape)
    conv = _conv(b, xv, b.constant(w, "w"), b.constant(bias, "bias"), stride)
    g = b.build(b.emit(Op.RELU, b.emit(Op.ADD, conv, rv)))
    ex = pl.graph.build(g)
    kernels = [k for k in ex.graph.bindings if isinstance(k, pl.graph.KernelCall)]
    assert len(kernels) == 1
    assert [str(c.op) for c in kernels[0].kernel.body] == ["conv2d", "add", "add", "relu"]
    out = np.full((1, 19, oh, ow), np.nan, np.float32)
    ex(x, res, out=(out,))
    t = torch.from_numpy
    expected = F.relu(F.conv2d(t(x), t(w), t(bias), stride=stride, padding=1) + t(res))
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-4, atol=1e-4)


def test_the_part_a_pooling_took_stays_in_the_pooling(rng):
    x = rng.standard_normal((1, 3, 10, 9), dtype=np.float32)
    w = rng.standard_normal((17, 3, 3, 3), dtype=np.float32)
    bias = rng.standard_normal(17, dtype=np.float32)
    b = pl.graph.GraphBuilder("f")
    xv = b.input("x", x.shape)
    conv = _conv(b, xv, b.constant(w, "w"), b.constant(bias, "bias"), 1)
    relu = b.emit(Op.RELU, conv)
    pooled = b.emit(Op.MAX_POOL2D, relu, kernel=(2, 2), stride=(2, 2), padding=(0, 0))
    # the biased result is also read by a second consumer: the bias stays with the conv, the
    # relu goes into the pooling
    g = b.build(pooled, b.emit(Op.MUL, conv, conv))
    ex, (p, sq) = _run(g, x, [(1, 17, 5, 4), (1, 17, 10, 9)])
    kernels = [k.kernel for k in ex.graph.bindings if isinstance(k, pl.graph.KernelCall)]
    bodies = [[str(c.op) for c in k.body] for k in kernels]
    assert bodies[0] == ["conv2d", "add"]
    assert ["relu", "max_pool2d"] in bodies
    t = torch.from_numpy
    ref = F.conv2d(t(x), t(w), t(bias), padding=1)
    np.testing.assert_allclose(p, F.max_pool2d(F.relu(ref), 2).numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sq, (ref * ref).numpy(), rtol=1e-4, atol=1e-4)
