# SPDX-License-Identifier: Apache-2.0
"""General rules of the graph level: every convolution of any kernel shape, padding, stride,
dilation and grouping runs the register-tile recipe on weights packed once; an injective chain
whose values are read several times inside it (SiLU, an erf GELU) fuses into one kernel, also as
a convolution's epilogue. Compared with PyTorch on odd sizes, NaN-poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op

torch = pytest.importorskip("torch", reason="the reference needs torch (extra 'graph')")
F = torch.nn.functional

# (in channels, out channels, kernel, padding, stride, dilation, groups): asymmetric 1 x 7 and
# 7 x 1, grouped with groups smaller and larger than a block, strided and dilated
CONVS = [(12, 24, (1, 7), (0, 3), (1, 1), (1, 1), 1),     # 24 outputs: half-vector blocks
         (12, 20, (7, 1), (3, 0), (2, 1), (1, 1), 1),
         (32, 64, (3, 3), (1, 1), (2, 2), (1, 1), 16),
         (26, 104, (3, 3), (1, 1), (2, 2), (1, 1), 13),   # 8 per group: blocks of one group
         (16, 64, (3, 3), (2, 2), (1, 1), (2, 2), 2),
         (24, 40, (3, 3), (1, 1), (1, 1), (1, 1), 8)]     # 5 per group: the default schedule


def _conv_silu_graph(c, k, kernel, padding, stride, dilation, groups, w, bias):
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", ("n", c, 13, 11))
    y = b.emit(Op.CONV2D, x, b.constant(w, "w"), b.constant(bias, "b"), stride=stride,
               padding=padding, dilation=dilation, groups=groups)
    return b.build(b.emit(Op.MUL, y, b.emit(Op.SIGMOID, y)))


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c[2])) + f"g{c[6]}")
def test_any_convolution_runs_the_packed_recipe_with_its_silu(case):
    c, k, kernel, padding, stride, dilation, groups = case
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, c // groups, *kernel)).astype("float32")
    bias = rng.standard_normal(k).astype("float32")
    ex = pl.graph.build(_conv_silu_graph(c, k, kernel, padding, stride, dilation, groups, w,
                                         bias))
    convs = [kc for kc in ex.graph.bindings if isinstance(kc, pl.graph.KernelCall)]
    assert len(convs) == 1                      # conv, bias and SiLU: one kernel
    body = convs[0].kernel.body
    assert [str(cl.op) for cl in body][-2:] == ["sigmoid", "mul"]
    # weights packed at build time unless a block can neither hold whole groups nor divide one
    assert len(body[0].inputs[1].type.shape) == (4 if k // groups == 5 else 5)
    x = rng.standard_normal((3, c, 13, 11)).astype("float32")
    ref = F.silu(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias),
                          stride, padding, dilation, groups)).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    ex(x, out=(out,))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_a_value_read_twice_inside_a_chain_stays_in_the_kernel_but_one_read_outside_splits():
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", (5, 37))
    t = b.emit(Op.TANH, x)
    inner = b.emit(Op.MUL, t, b.emit(Op.SIGMOID, t))          # t read twice, inside
    g = pl.graph.optimize(b.build(inner, b.emit(Op.EXP, t)))  # and once more outside
    kernels = [kc for kc in g.bindings if isinstance(kc, pl.graph.KernelCall)]
    assert [str(c.op) for c in kernels[0].kernel.body] == ["tanh"]
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", (5, 37))
    t = b.emit(Op.TANH, x)
    g = b.build(b.emit(Op.MUL, t, b.emit(Op.SIGMOID, t)))
    kernels = [kc for kc in pl.graph.optimize(g).bindings if isinstance(kc, pl.graph.KernelCall)]
    assert [str(c.op) for c in kernels[0].kernel.body] == ["tanh", "sigmoid", "mul"]
    xv = np.random.default_rng(1).standard_normal((5, 37)).astype("float32")
    out = np.full((5, 37), np.nan, np.float32)
    pl.graph.build(g)(xv, out=(out,))
    tv = np.tanh(xv)
    np.testing.assert_allclose(out, tv / (1 + np.exp(-tv)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel,stride", [(3, (2, 2)), (5, (2, 1))])
def test_strided_depthwise_runs_the_depthwise_recipe(kernel, stride):
    c = 19
    rng = np.random.default_rng(2)
    w = rng.standard_normal((c, 1, kernel, kernel)).astype("float32")
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", ("n", c, 15, 13))
    y = b.emit(Op.CONV2D, x, b.constant(w, "w"), stride=stride, padding=(kernel // 2,) * 2,
               dilation=(1, 1), groups=c)
    g = b.build(y)
    ex = pl.graph.build(g)
    kernels = [kc for kc in ex.graph.bindings if isinstance(kc, pl.graph.KernelCall)]
    assert pl.graph.passes.library_conv(kernels[0].kernel.body[0]) == "depthwise"
    xv = rng.standard_normal((2, c, 15, 13)).astype("float32")
    ref = F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), None, stride, kernel // 2, 1,
                   c).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    ex(xv, out=(out,))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [(1, 1), (2, 2)])
def test_depthwise_bias_and_silu_run_on_each_row_in_one_kernel(stride):
    c = 21
    rng = np.random.default_rng(3)
    w = rng.standard_normal((c, 1, 3, 3)).astype("float32")
    bias = rng.standard_normal(c).astype("float32")
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", ("n", c, 17, 23))
    y = b.emit(Op.CONV2D, x, b.constant(w, "w"), b.constant(bias, "b"), stride=stride,
               padding=(1, 1), dilation=(1, 1), groups=c)
    ex = pl.graph.build(b.build(b.emit(Op.MUL, y, b.emit(Op.SIGMOID, y))))
    kernels = [kc for kc in ex.graph.bindings if isinstance(kc, pl.graph.KernelCall)]
    assert len(kernels) == 1
    assert [str(cl.op) for cl in kernels[0].kernel.body][-2:] == ["sigmoid", "mul"]
    xv = rng.standard_normal((2, c, 17, 23)).astype("float32") * 40    # SiLU's tails too
    ref = F.silu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w), torch.from_numpy(bias),
                          stride, 1, 1, c)).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    ex(xv, out=(out,))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k", [40, 104, 8])
def test_output_channels_of_half_vectors_run_blocks_of_whole_half_vectors(k):
    """A 1 x 1 convolution whose output channels end in half a vector (104 of AVX-512's 16
    lanes) packs its weights in blocks of three half vectors (the last block partial, but of
    whole half vectors), with its ReLU; symbolic batch, NaN-poisoned output."""
    from polyloop.ops import conv2d_channel_block
    c = 19
    rng = np.random.default_rng(4)
    w = rng.standard_normal((k, c, 1, 1)).astype("float32")
    bias = rng.standard_normal(k).astype("float32")
    b = pl.graph.GraphBuilder("g")
    x = b.input("x", ("n", c, 9, 11))
    y = b.emit(Op.CONV2D, x, b.constant(w, "w"), b.constant(bias, "b"), stride=(1, 1),
               padding=(0, 0), dilation=(1, 1), groups=1)
    ex = pl.graph.build(b.build(b.emit(Op.RELU, y)))
    kernels = [kc for kc in ex.graph.bindings if isinstance(kc, pl.graph.KernelCall)]
    assert len(kernels) == 1
    half = conv2d_channel_block() // 4
    if k % (2 * half) and k % half == 0:
        assert kernels[0].kernel.body[0].inputs[1].type.shape[-1] == half * min(3, k // half)
    xv = rng.standard_normal((2, c, 9, 11)).astype("float32")
    ref = F.relu(F.conv2d(torch.from_numpy(xv), torch.from_numpy(w),
                          torch.from_numpy(bias))).numpy()
    out = np.full(ref.shape, np.nan, np.float32)
    ex(xv, out=(out,))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
