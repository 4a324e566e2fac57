# SPDX-License-Identifier: Apache-2.0
"""Attention (polyloop.ops.attention) against PyTorch's scaled_dot_product_attention, at sizes
that divide no tile, with a symbolic batch; outputs are poisoned with NaN."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is PyTorch's attention (extra 'graph')")
F = torch.nn.functional

B = pl.var("b")


def reference(q, k, v, **kw):
    return F.scaled_dot_product_attention(*(torch.from_numpy(x) for x in (q, k, v)), **kw).numpy()


def module(q_shape, k_shape, v_shape, **kw):
    knobs = {key: kw.pop(key) for key in ("mr", "nr_vectors", "lanes", "per_head")
             if key in kw}
    q, k, v = (pl.placeholder(s, name=n) for s, n in zip((q_shape, k_shape, v_shape), "qkv"))
    return pl.build(ops.schedule_attention(ops.attention(q, k, v, **kw), **knobs))


def check(mod, rng, batch, s, l, e, ev, **kw):
    q = rng.standard_normal((batch, 3, s, e), dtype=np.float32)
    k = rng.standard_normal((batch, 3, l, e), dtype=np.float32)
    v = rng.standard_normal((batch, 3, l, ev), dtype=np.float32)
    out = np.full((batch, 3, s, ev), np.nan, np.float32)
    mod(q, k, v, out)
    np.testing.assert_allclose(out, reference(q, k, v, **kw), rtol=1e-5, atol=1e-5)


# queries 37 and keys 29: neither a multiple of the 6-row tile nor of a 16-lane vector
@pytest.mark.parametrize("causal", [False, True])
def test_attention_equals_pytorch_with_a_symbolic_batch(rng, causal):
    mod = module((B, 3, 37, 20), (B, 3, 29, 20), (B, 3, 29, 24), causal=causal)
    for batch in (2, 1):
        check(mod, rng, batch, 37, 29, 20, 24, is_causal=causal)


@pytest.mark.parametrize("per_head", [True, False])
def test_attention_scale_and_knobs_keep_the_result(rng, per_head):
    mod = module((2, 3, 19, 8), (2, 3, 45, 8), (2, 3, 45, 5), scale=0.3, mr=4, nr_vectors=1,
                 lanes=8, per_head=per_head)
    check(mod, rng, 2, 19, 45, 8, 5, scale=0.3)


def test_attention_with_a_symbolic_sequence(rng):
    s = pl.var("s")
    q, k, v = (pl.placeholder((2, s, 8), name=n) for n in "qkv")
    mod = pl.build(ops.schedule_attention(ops.attention(q, k, v, causal=True)))
    for n in (1, 70):
        x = [rng.standard_normal((2, n, 8), dtype=np.float32) for _ in range(3)]
        out = np.full((2, n, 8), np.nan, np.float32)
        mod(*x, out)
        np.testing.assert_allclose(out, reference(*x, is_causal=True), rtol=1e-5, atol=1e-5)


def test_large_scores_do_not_overflow(rng):
    mod = module((1, 3, 17, 16), (1, 3, 17, 16), (1, 3, 17, 16))
    q = 40 * rng.standard_normal((1, 3, 17, 16), dtype=np.float32)
    out = np.full(q.shape, np.nan, np.float32)
    mod(q, q, q, out)
    np.testing.assert_allclose(out, reference(q, q, q), rtol=1e-5, atol=1e-5)


def test_schedule_attention_names_what_it_expects():
    x = pl.placeholder((4, 8), name="x")
    with pytest.raises(pl.ScheduleError, match="attention"):
        ops.schedule_attention(pl.compute((4, 8), lambda i, j: x[i, j] * 2.0, name="y"))
    with pytest.raises(pl.ScheduleError, match="batch axis"):
        ops.schedule_attention(ops.attention(x, x, x))
    with pytest.raises(pl.ScheduleError, match="shapes do not match"):
        ops.attention(pl.placeholder((2, 4, 8), name="q"), pl.placeholder((3, 4, 8), name="k"),
                      pl.placeholder((3, 4, 8), name="v"))
    e = pl.var("e")
    q = pl.placeholder((2, 4, e), name="q")
    with pytest.raises(pl.ScheduleError, match="scale="):
        ops.attention(q, q, q)
