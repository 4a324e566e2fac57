# SPDX-License-Identifier: Apache-2.0
"""``pl.graph.build(g, dtype="bfloat16")``: convolutions and matrix products on bf16 inputs and
weights with float32 sums, everything else float32.

Each model is checked against a NumPy reference that rounds every product's inputs and weights
to bfloat16 (to nearest even) and sums in float64: a layer that silently stayed float32, or a
rounding other than to nearest even, moves almost every output by a few bf16 steps and fails
it; and against the float32 model, within the error bf16 products make. Odd channel and
feature counts, a symbolic batch, NaN-poisoned outputs.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.bfloat16 import Bf16Conv, Bf16Matmul

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays (extra 'bf16')")
Op = pl.graph.Op


def bf(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 (to nearest even), as float64."""
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def conv_ref(x, w, b, stride, pad, rounded=True):
    """A convolution of x and w (rounded to bfloat16 when ``rounded``) summed in float64, plus
    the bias."""
    x, w = (bf(x), bf(w)) if rounded else (np.float64(x), np.float64(w))
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            win = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", win, w[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


def poisoned_run(ex, *inputs, shape):
    out = np.full(shape, np.nan, np.float32)
    ex(*inputs, out=(out,))
    assert not np.isnan(out).any(), "an output element was not written"
    return out


def close_fraction(got, ref, tol):
    """The fraction of outputs within ``tol`` times the output's scale of the reference."""
    return float(np.mean(np.abs(got - ref) <= tol * np.abs(ref).max()))


# -- a small CNN: conv (odd channels) + ReLU, strided conv + residual 1x1 conv, dense layer --

RNG = np.random.default_rng(7)
W1, B1 = RNG.standard_normal((7, 3, 3, 3)).astype("f4"), RNG.standard_normal(7).astype("f4")
W2, B2 = RNG.standard_normal((5, 7, 3, 3)).astype("f4"), RNG.standard_normal(5).astype("f4")
W3 = RNG.standard_normal((5, 7, 1, 1)).astype("f4")
WD, BD = RNG.standard_normal((5 * 6 * 7, 13)).astype("f4"), RNG.standard_normal(13).astype("f4")


def cnn_graph():
    b = pl.graph.GraphBuilder("cnn")
    x = b.input("x", ("n", 3, 11, 13))
    geo = dict(dilation=(1, 1), groups=1)
    h = b.emit(Op.RELU, b.emit(Op.CONV2D, x, b.constant(W1, "w1"), b.constant(B1, "b1"),
                               stride=(1, 1), padding=(1, 1), **geo))
    main = b.emit(Op.CONV2D, h, b.constant(W2, "w2"), b.constant(B2, "b2"), stride=(2, 2),
                  padding=(1, 1), **geo)
    side = b.emit(Op.CONV2D, h, b.constant(W3, "w3"), stride=(2, 2), padding=(0, 0), **geo)
    r = b.emit(Op.RELU, b.emit(Op.ADD, main, side))
    flat = b.emit(Op.RESHAPE, r, shape=("n", 5 * 6 * 7))
    y = b.emit(Op.ADD, b.emit(Op.MATMUL, flat, b.constant(WD, "wd")), b.constant(BD, "bd"))
    return b.build(y)


def cnn_reference(x, rounded=True):
    """The CNN in float64; ``rounded``: each product's operands rounded to bfloat16."""
    r = bf if rounded else (lambda a: np.asarray(a, np.float64))
    h = np.maximum(conv_ref(x, W1, B1, 1, 1, rounded), 0).astype(np.float32)
    z = conv_ref(h, W2, B2, 2, 1, rounded) + conv_ref(h, W3, np.zeros(5, "f4"), 2, 0, rounded)
    flat = np.maximum(z, 0).astype(np.float32).reshape(len(x), -1)
    return r(flat) @ r(WD) + BD


@pytest.fixture(scope="module")
def cnn():
    return pl.graph.build(cnn_graph(), dtype="bfloat16")


@pytest.mark.parametrize("batch", [1, 3])
def test_cnn_equals_the_bf16_reference(cnn, batch):
    ex = cnn
    x = np.random.default_rng(batch).standard_normal((batch, 3, 11, 13)).astype("f4")
    got = poisoned_run(ex, x, shape=(batch, 13))
    ref = cnn_reference(x)
    # a bf16 rounding of an activation may land on the other side of a tie in float32 and
    # float64 sums: a few outputs move by one step, nearly all agree to float32 rounding
    assert close_fraction(got, ref, 1e-5) >= 0.95
    np.testing.assert_allclose(got, ref, atol=2e-3 * np.abs(ref).max())
    # the float32 model misses the same reference (the check tells the two apart), and the
    # bf16 build stays within bf16's error of it
    exact = cnn_reference(x, rounded=False)
    assert close_fraction(exact, ref, 1e-5) < 0.5
    np.testing.assert_allclose(got, exact, atol=2e-2 * np.abs(ref).max())


def test_cnn_runs_every_product_in_bf16_with_fused_epilogues(cnn):
    ex = cnn
    kernels = [b.kernel for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall)]
    fns = [c.attr("fn") for k in kernels for c in k.body if c.op is Op.TE]
    assert sorted(type(f).__name__ for f in fns) == ["Bf16Conv"] * 3 + ["Bf16Matmul"]
    assert not any(c.op in (Op.CONV2D, Op.MATMUL, Op.LINEAR) for k in kernels for c in k.body)
    # ReLU after the first convolution, add + ReLU after the second: in their kernels
    assert any([str(c.op) for c in k.body] == ["te", "relu"] for k in kernels)
    # the weights: rounded to bf16 once and packed as the recipe reads them
    weights = {c.value.name: c.data for c in ex.graph.constants}
    w1 = next(v for k in kernels for c in k.body if isinstance(c.attr("fn"), Bf16Conv)
              and c.attr("fn").stride == 1 for v in c.inputs[1:2])
    np.testing.assert_array_equal(weights[w1.name], pl.ops.pack_bf16_conv_weight(W1))
    assert weights[w1.name].dtype == ml_dtypes.bfloat16
    text = ex.report()
    assert text.count("(bfloat16 products)") == 4 and "0 product(s) in float32" in text


def test_single_layers_equal_the_reference_exactly_rounded():
    """One convolution and one dense layer on the graph's input: no activation rounding can
    differ, so the result is the rounded reference to float32 summation."""
    b = pl.graph.GraphBuilder("one")
    x = b.input("x", ("n", 5, 9, 8))
    w = RNG.standard_normal((9, 5, 3, 3)).astype("f4")
    y = b.emit(Op.CONV2D, x, b.constant(w, "w"), stride=(2, 2), padding=(1, 1),
               dilation=(1, 1), groups=1)
    ex = pl.graph.build(b.build(y), dtype="bfloat16")
    xs = RNG.standard_normal((2, 5, 9, 8)).astype("f4")
    ref = conv_ref(xs, w, np.zeros(9), 2, 1)
    got = poisoned_run(ex, xs, shape=ref.shape)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    # rounding toward zero instead of to nearest even is told apart
    trunc = lambda a: (a.astype("f4").view("u4") & 0xFFFF0000).view("f4")   # noqa: E731
    wrong = conv_ref(trunc(xs), trunc(w), np.zeros(9), 2, 1)
    assert np.abs(got - wrong).max() > 1e-3 * np.abs(ref).max()


# -- a transformer block: projections, two batched attention products, GELU feed-forward --

D, HEADS, FFN, SEQ = 22, 2, 37, 9
BLOCK = {name: RNG.standard_normal(shape).astype("f4") * scale for name, shape, scale in (
    ("qkv.weight", (3 * D, D), 0.3), ("qkv.bias", (3 * D,), 0.1),
    ("out.weight", (D, D), 0.3), ("out.bias", (D,), 0.1),
    ("ln.weight", (D,), 1.0), ("ln.bias", (D,), 0.1),
    ("up.weight", (FFN, D), 0.3), ("up.bias", (FFN,), 0.1),
    ("down.weight", (D, FFN), 0.3), ("down.bias", (D,), 0.1))}


def block_graph():
    """``h = x + out(attention(qkv(x)))``, ``y = h + down(gelu(up(layer_norm(h))))``, the
    batch symbolic: the attention products are 4-D with a symbolic leading axis."""
    b = pl.graph.GraphBuilder("block")
    x = b.input("x", ("n", SEQ, D))
    c = {k: b.constant(v, k.replace(".", "_")) for k, v in BLOCK.items()}

    def linear(t, name):
        return b.emit(Op.LINEAR, t, c[f"{name}.weight"], c[f"{name}.bias"])
    qkv = linear(x, "qkv")
    heads = [b.emit(Op.PERMUTE, b.emit(Op.RESHAPE, b.emit(
        Op.SLICE, qkv, begin=(0, 0, k * D), step=(1, 1, 1), size=("n", SEQ, D)),
        shape=("n", SEQ, HEADS, D // HEADS)), axes=(0, 2, 1, 3)) for k in range(3)]
    kt = b.emit(Op.PERMUTE, heads[1], axes=(0, 1, 3, 2))
    scale = b.constant(np.array(1 / np.sqrt(D // HEADS), "f4"), "scale")
    scores = b.emit(Op.MUL, b.emit(Op.MATMUL, heads[0], kt), scale)
    att = b.emit(Op.MATMUL, b.emit(Op.SOFTMAX, scores, axis=-1), heads[2])
    merged = b.emit(Op.RESHAPE, b.emit(Op.PERMUTE, att, axes=(0, 2, 1, 3)), shape=("n", SEQ, D))
    h = b.emit(Op.ADD, x, linear(merged, "out"))
    n = b.emit(Op.LAYER_NORM, h, c["ln.weight"], c["ln.bias"], eps=1e-5)
    return b.build(b.emit(Op.ADD, h, linear(b.emit(Op.GELU, linear(n, "up")), "down")))


def block_reference(x: np.ndarray, rounded=True) -> np.ndarray:
    """The block in float64, every product's operands rounded to bfloat16 when ``rounded``."""
    r = bf if rounded else (lambda a: np.asarray(a, np.float64))
    f32 = lambda a: np.asarray(a, np.float32)                              # noqa: E731

    def lin(t, name):
        return r(t) @ r(BLOCK[f"{name}.weight"].T) + BLOCK[f"{name}.bias"]
    b = len(x)
    q, k, v = np.split(f32(lin(x, "qkv")), 3, axis=-1)
    split = lambda t: t.reshape(b, SEQ, HEADS, -1).transpose(0, 2, 1, 3)   # noqa: E731
    q, k, v = split(q), split(k), split(v)
    scores = f32(r(q) @ r(k.transpose(0, 1, 3, 2))) * np.float32(1 / np.sqrt(D // HEADS))
    e = np.exp(scores - scores.max(-1, keepdims=True))
    att = f32(e / e.sum(-1, keepdims=True))
    h = f32(x + lin(f32(r(att) @ r(v)).transpose(0, 2, 1, 3).reshape(b, SEQ, D), "out"))
    mu, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    n = f32((h - mu) / np.sqrt(var + 1e-5) * BLOCK["ln.weight"] + BLOCK["ln.bias"])
    u = lin(n, "up")
    g = f32(0.5 * u * (1 + np.vectorize(math.erf)(u / np.sqrt(2))))
    return h + lin(g, "down")


@pytest.fixture(scope="module")
def block():
    return pl.graph.build(block_graph(), dtype="bfloat16")


@pytest.mark.parametrize("batch", [1, 2])
def test_block_equals_the_bf16_reference(block, batch):
    x = np.random.default_rng(11 + batch).standard_normal((batch, SEQ, D)).astype("f4")
    got = poisoned_run(block, x, shape=(batch, SEQ, D))
    ref = block_reference(x)
    assert close_fraction(got, ref, 1e-5) >= 0.95
    np.testing.assert_allclose(got, ref, atol=2e-3 * np.abs(ref).max())
    exact = block_reference(x, rounded=False)
    assert close_fraction(exact, ref, 1e-5) < 0.5       # float32 misses the rounded reference
    np.testing.assert_allclose(got, exact, atol=2e-2 * np.abs(exact).max())


def test_block_runs_projections_and_attention_products_in_bf16(block):
    fns = [c.attr("fn") for b in block.graph.bindings if isinstance(b, pl.graph.KernelCall)
           for c in b.kernel.body if c.op is Op.TE]
    dense = [f for f in fns if isinstance(f, Bf16Matmul) and f.columns is not None]
    batched = [f for f in fns if isinstance(f, Bf16Matmul) and f.columns is None]
    assert len(dense) == 4 and len(batched) == 2
    assert "0 product(s) in float32" in block.report()


def test_default_build_is_the_float32_build():
    from polyloop.graph.build import optimize
    g = cnn_graph()
    assert str(optimize(g)) == str(optimize(g, dtype="float32"))
    assert not any(c.value.type.dtype == "bfloat16" for c in optimize(g).constants)


@pytest.mark.parametrize("dtype", ["float16", "bf16", None, 16])
def test_unknown_dtype_is_refused_naming_the_argument(dtype):
    b = pl.graph.GraphBuilder("f")
    g = b.build(b.emit(Op.RELU, b.input("x", (2,))))
    with pytest.raises(pl.PolyloopError, match=r"dtype=.*'float32', 'bfloat16'"):
        pl.graph.build(g, dtype=dtype)


# -- wide rows, a residual add along them, strided 1 x 1 and 3 x 3 convolutions --

torch = pytest.importorskip("torch")
RW = {name: (RNG.standard_normal(shape) * 0.4).astype("f4") for name, shape in (
    ("w1", (9, 5, 3, 3)), ("b1", (9,)), ("w2", (5, 9, 1, 1)), ("b2", (5,)),
    ("w3", (12, 5, 3, 3)), ("w4", (12, 5, 1, 1)), ("b4", (12,)))}


def rows_graph():
    """Rows of 23 pixels (the row tiles' recipe, NCHW in and out), a 1 x 1 convolution with
    a residual add (the input) and ReLU along its rows, then a stride-2 3 x 3 convolution and a stride-2
    1 x 1 one (its pixels sliced first) added on rows of 12 (pixel-major)."""
    b = pl.graph.GraphBuilder("rows")
    x = b.input("x", ("n", 5, 22, 23))
    c = {k: b.constant(v, k) for k, v in RW.items()}

    def conv(t, w, *bias, stride=1, pad=0):
        return b.emit(Op.CONV2D, t, c[w], *(c[v] for v in bias), stride=(stride, stride),
                      padding=(pad, pad), dilation=(1, 1), groups=1)
    h = b.emit(Op.RELU, conv(x, "w1", "b1", pad=1))
    h2 = b.emit(Op.RELU, b.emit(Op.ADD, conv(h, "w2", "b2"), x))
    y = b.emit(Op.ADD, conv(h2, "w3", stride=2, pad=1), conv(h2, "w4", "b4", stride=2))
    return b.build(b.emit(Op.RELU, y))


def rows_reference(x: np.ndarray, rounded: bool) -> np.ndarray:
    """The model in float64 (PyTorch), each product's operands rounded to bfloat16 when
    ``rounded``, every activation float32 as the build stores it."""
    r = bf if rounded else (lambda a: np.asarray(a, np.float64))
    f32 = lambda a: np.asarray(a, np.float32)                              # noqa: E731
    fc = torch.nn.functional.conv2d

    def conv(t, w, bias=None, stride=1, pad=0):
        out = fc(torch.from_numpy(r(t)), torch.from_numpy(r(RW[w])), stride=stride,
                 padding=pad).numpy()
        return out + RW[bias].astype(np.float64).reshape(1, -1, 1, 1) if bias else out
    h = f32(np.maximum(conv(x, "w1", "b1", pad=1), 0))
    h2 = f32(np.maximum(conv(h, "w2", "b2") + x, 0))
    return np.maximum(conv(h2, "w3", stride=2, pad=1) + conv(h2, "w4", "b4", stride=2), 0)


def test_rows_model_equals_the_bf16_reference_and_pytorch():
    ex = pl.graph.build(rows_graph(), dtype="bfloat16")
    fns = [type(c.attr("fn")).__name__ for b in ex.graph.bindings
           if isinstance(b, pl.graph.KernelCall) for c in b.kernel.body if c.op is Op.TE]
    assert sorted(fns) == ["Bf16Conv"] * 2 + ["Bf16ConvRows"] * 2
    assert "0 product(s) in float32" in ex.report()
    # the first ReLU's output, read by a bf16 convolution alone, is stored as bfloat16 by
    # its kernel; the second one's, read by a slice too, stays float32
    ends = [[c.outputs[0].type.dtype for c in b.kernel.body][-1] for b in ex.graph.bindings
            if isinstance(b, pl.graph.KernelCall)]
    assert ends[0] == "bfloat16" and ends.count("bfloat16") == 1
    for batch in (1, 2):
        x = np.random.default_rng(batch).standard_normal((batch, 5, 22, 23)).astype("f4")
        got = poisoned_run(ex, x, shape=(batch, 12, 11, 12))
        ref = rows_reference(x, rounded=True)
        assert close_fraction(got, ref, 1e-5) >= 0.95
        np.testing.assert_allclose(got, ref, atol=2e-3 * np.abs(ref).max())
        exact = rows_reference(x, rounded=False)
        assert close_fraction(exact, ref, 1e-5) < 0.5
        np.testing.assert_allclose(got, exact, atol=2e-2 * np.abs(exact).max())
