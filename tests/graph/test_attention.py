# SPDX-License-Identifier: Apache-2.0
"""Attention in a graph: split into a kernel of its own, scheduled by ops.schedule_attention,
equal to PyTorch with a symbolic batch and poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.build import optimize
from polyloop.graph.ir import KernelCall
from polyloop.graph.passes.attention import attention_schedule, library_attention

torch = pytest.importorskip("torch", reason="the reference is PyTorch's attention (extra 'graph')")
F = torch.nn.functional
Op = pl.graph.Op


def attention_graph(causal: bool):
    """Attention over 3 heads, 37 queries, 29 keys, values of 24, then an elementwise op."""
    b = pl.graph.GraphBuilder("att")
    q = b.input("q", ("n", 3, 37, 16))
    k = b.input("k", ("n", 3, 29, 16))
    v = b.input("v", ("n", 3, 29, 24))
    a = b.emit(Op.ATTENTION, q, k, v, causal=causal, scale=None)
    return b.build(b.emit(Op.RELU, a))


@pytest.fixture(scope="module", params=[False, True], ids=["full", "causal"])
def built(request):
    g = attention_graph(request.param)
    return pl.graph.build(g), optimize(g), request.param


def test_attention_kernel_is_split_out_and_uses_the_library_schedule(built):
    _, g, _ = built
    kernels = [b for b in g.bindings if isinstance(b, KernelCall)]
    assert [len(kc.kernel.body) for kc in kernels] == [1, 1]
    assert library_attention(kernels[0].kernel.body[0])
    sch = attention_schedule(kernels[0])
    assert sch is not None and "att" in str(sch) and "_qk_local" in str(sch)
    assert attention_schedule(kernels[1]) is None


@pytest.mark.parametrize("batch", [2, 1])
def test_attention_graph_equals_pytorch(built, rng, batch):
    ex, _, causal = built
    q = rng.standard_normal((batch, 3, 37, 16), dtype=np.float32)
    k = rng.standard_normal((batch, 3, 29, 16), dtype=np.float32)
    v = rng.standard_normal((batch, 3, 29, 24), dtype=np.float32)
    out = np.full((batch, 3, 37, 24), np.nan, np.float32)
    ex(q, k, v, out=(out,))
    t = [torch.from_numpy(x) for x in (q, k, v)]
    want = torch.relu(F.scaled_dot_product_attention(*t, is_causal=causal)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_other_attention_keeps_the_default_schedule():
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", (5, 8))
    two_d = b.build(b.emit(Op.ATTENTION, x, x, x, causal=False, scale=None)).bindings[0]
    assert not library_attention(two_d)
    b = pl.graph.GraphBuilder("f")
    x = b.input("x", (2, 5, 8), "float64")
    f64 = b.build(b.emit(Op.ATTENTION, x, x, x, causal=False, scale=None)).bindings[0]
    assert not library_attention(f64)


def test_attention_without_heads_has_the_values_width(rng):
    b = pl.graph.GraphBuilder("f")
    q, v = b.input("q", (5, 8)), b.input("v", (5, 3))
    ex = pl.graph.build(b.build(b.emit(Op.ATTENTION, q, q, v, causal=True, scale=None)))
    xq, xv = rng.standard_normal((5, 8), dtype=np.float32), rng.standard_normal((5, 3),
                                                                                dtype=np.float32)
    out = np.full((5, 3), np.nan, np.float32)
    ex(xq, xv, out=(out,))
    tq, tv = torch.from_numpy(xq), torch.from_numpy(xv)
    want = F.scaled_dot_product_attention(tq, tq, tv, is_causal=True).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_attention_shapes_are_checked():
    b = pl.graph.GraphBuilder("f")
    q, k = b.input("q", (2, 5, 8)), b.input("k", (2, 6, 4))
    with pytest.raises(pl.PolyloopError, match="attention needs"):
        b.emit(Op.ATTENTION, q, k, k, causal=False, scale=None)
