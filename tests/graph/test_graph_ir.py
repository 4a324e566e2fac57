# SPDX-License-Identifier: Apache-2.0
"""The graph IR, its passes and the executor on hand-written graphs, against NumPy (no torch
needed: these run everywhere)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op, passes

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def conv_bn_graph():
    b = pl.graph.GraphBuilder("cbr")
    x = b.input("x", ("n", 2, 6, 5))
    w = b.constant(rand(3, 2, 3, 3), "w")
    bn = [b.constant(v, k) for k, v in (("g", rand(3)), ("b", rand(3)), ("m", rand(3)),
                                         ("v", np.abs(rand(3)) + 0.5))]
    y = b.emit(Op.CONV2D, x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    y = b.emit(Op.RELU, b.emit(Op.BATCH_NORM, y, *bn, eps=1e-5))
    unused = b.emit(Op.EXP, x)  # noqa: F841 - dead code for the pass to remove
    flat = b.emit(Op.RESHAPE, y, shape=("n", 90))
    return b.build(b.emit(Op.SOFTMAX, flat, axis=1)), x


def numpy_reference(g, x):
    c = g.constant_data()
    w, gam, bet, mean, var = c["w"], c["g"], c["b"], c["m"], c["v"]
    n = x.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((n, 3, 6, 5), "float64")
    for r in range(3):
        for s in range(3):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, r:r + 6, s:s + 5], w[:, :, r, s])
    y = (y - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * gam[:, None, None] \
        + bet[:, None, None]
    y = np.maximum(y, 0).reshape(n, 90)
    e = np.exp(y - y.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_text_form_and_types():
    g, _ = conv_bn_graph()
    text = str(g)
    assert "def cbr(%x: float32[n, 2, 6, 5]) -> float32[n, 90]:" in text
    assert "%conv2d = conv2d(%x, %w, dilation=(1, 1), groups=1, padding=(1, 1), stride=(1, 1))" \
        "  # float32[n, 3, 6, 5]" in text
    assert g.params == ("n",)


def test_passes_fold_remove_and_fuse():
    g, _ = conv_bn_graph()
    folded = passes.fold_constants(g)
    assert "= batch_norm(" not in str(folded)
    clean = passes.remove_dead_code(folded)
    assert "exp(" not in str(clean) and len(clean.constants) == 2   # folded w and b only
    fused = passes.fuse_operators(clean)
    kernels = [b.kernel for b in fused.bindings if isinstance(b, pl.graph.KernelCall)]
    assert [[str(c.op) for c in k.body] for k in kernels] == [["conv2d", "relu"], ["softmax"]]


@pytest.fixture(scope="module")
def cbr():
    g, _ = conv_bn_graph()
    return g, pl.graph.build(g)


@pytest.mark.parametrize("n", [1, 3])
def test_conv_bn_relu_softmax_equals_numpy(cbr, n):
    g, ex = cbr
    x = rand(n, 2, 6, 5)
    out = np.full((n, 90), np.nan, "float32")
    ex(x, out=(out,))
    np.testing.assert_allclose(out, numpy_reference(g, x), rtol=1e-5, atol=1e-6)


def test_memory_plan_reuses_dead_buffers():
    b = pl.graph.GraphBuilder("chain")
    x = b.input("x", ("n", 8))
    v = x
    for _ in range(5):
        v = b.emit(Op.SOFTMAX, v, axis=1)   # not fusable: each its own kernel
    g = passes.fuse_operators(b.build(v))
    plan = pl.graph.plan_memory(g)
    assert len(plan.slots) == 2             # four intermediates in two slots
    ex = pl.graph.build(b.build(v))
    xv = rand(4, 8)
    ref = xv.astype("float64")
    for _ in range(5):
        e = np.exp(ref - ref.max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(ex(xv), ref, rtol=1e-5, atol=1e-6)


def test_outputs_that_are_inputs_or_views_are_copied():
    b = pl.graph.GraphBuilder("views")
    x = b.input("x", (2, 6))
    ex = pl.graph.build(b.build(x, b.emit(Op.RESHAPE, x, shape=(3, 4))))
    xv = rand(2, 6)
    same, view = ex(xv)
    np.testing.assert_array_equal(same, xv)
    np.testing.assert_array_equal(view, xv.reshape(3, 4))


def test_argument_and_build_errors():
    b = pl.graph.GraphBuilder("e")
    x = b.input("x", ("n", 4))
    ex = pl.graph.build(b.build(b.emit(Op.RELU, x)))
    with pytest.raises(pl.ArgumentError, match="takes 1 inputs"):
        ex()
    with pytest.raises(pl.ArgumentError, match="expected a NumPy array"):
        ex([1, 2, 3, 4])
    with pytest.raises(pl.ArgumentError, match="output 'relu'"):
        ex(rand(2, 4), out=(np.zeros((3, 4), "float32"),))
    with pytest.raises(pl.PolyloopError, match="target 'cuda' is not supported"):
        pl.graph.build(b.build(x), target="cuda")
    with pytest.raises(pl.PolyloopError, match="env.<operator>"):
        pl.graph.register_extern("conv2d", print)
    with pytest.raises(pl.PolyloopError, match="dtype 'uint16'"):
        b.input("h", (2,), "uint16")


def test_database_without_a_record_warns_and_builds_the_default(tmp_path):
    b = pl.graph.GraphBuilder("db")
    x = b.input("x", (4,))
    g = b.build(b.emit(Op.RELU, x))
    with pytest.warns(RuntimeWarning, match="no successful record"):
        ex = pl.graph.build(g, database=str(tmp_path / "tune"))
    v = np.array([-1.0, 2.0, -3.0, 4.0], "float32")
    np.testing.assert_array_equal(ex(v), np.maximum(v, 0))


def test_emit_te_kernel_in_a_graph():
    def scaled_gram(a):
        k = pl.reduce_axis((0, a.shape[1]), name="k")
        return pl.compute((a.shape[0], a.shape[0]),
                          lambda i, j: pl.sum(a[i, k] * a[j, k], axis=k), name="gram")
    b = pl.graph.GraphBuilder("custom")
    x = b.input("x", ("n", 5))
    y = b.emit(Op.RELU, b.emit_te(scaled_gram, x))
    g = b.build(y)
    assert "te(%x, fn=test_emit_te_kernel_in_a_graph.<locals>.scaled_gram, program=" in str(g)
    assert y.type == pl.graph.TensorType(("n", "n"))
    xv = rand(3, 5)
    np.testing.assert_allclose(pl.graph.build(g)(xv), np.maximum(xv @ xv.T, 0), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(pl.PolyloopError, match="must return a tensor"):
        b.emit_te(lambda a: a, x)
    z = b.input("z", (3,))     # an input the kernel does not read would shift its arguments
    with pytest.raises(pl.PolyloopError, match=r"does not read the input\(s\) \['z'\]"):
        b.emit_te(lambda a, c: pl.compute(a.shape, lambda i, j: a[i, j] * 2.0), x, z)


def test_conv2d_takes_pytorchs_defaults_and_names_a_missing_attribute():
    b = pl.graph.GraphBuilder("c")
    x = b.input("x", ("n", 6, 9, 7))
    y = b.emit(Op.CONV2D, x, b.constant(rand(4, 3, 3, 3), "w"), groups=2)
    assert dict(b.build(y).bindings[-1].attrs) == {"stride": (1, 1), "padding": (0, 0),
                                                    "dilation": (1, 1), "groups": 2}
    with pytest.raises(pl.PolyloopError, match="attribute 'axes' is missing"):
        b.emit(Op.PERMUTE, x)
