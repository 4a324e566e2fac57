# SPDX-License-Identifier: Apache-2.0
"""``auto_schedule(cache_share=)``: the share of L2 the cache model's tiles fill (what the
tuner draws around the model's own choice)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def _transposed_product():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float64", name="A")
    y = pl.placeholder((n,), "float64", name="y")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n,), lambda i: pl.sum(A[k, i] * y[k], axis=k), name="x")


def _factors(sch):
    return [f for step in sch.trace if step.primitive == "split"
            for f in dict(step.kwargs)["factors"] if f is not None]


def test_a_smaller_share_makes_smaller_tiles_and_the_same_results():
    x = _transposed_product()
    half = pl.auto_schedule(x)
    eighth = pl.auto_schedule(x, cache_share=0.125)
    assert _factors(half) and _factors(eighth)
    assert max(_factors(eighth)) < max(_factors(half))
    rng = np.random.default_rng(0)
    a, y = rng.standard_normal((301, 301)), rng.standard_normal(301)
    for sch in (half, eighth):
        np.testing.assert_allclose(pl.build(sch)(a, y), a.T @ y, rtol=1e-10)


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, True, "half"])
def test_a_share_outside_zero_to_one_is_refused(bad):
    with pytest.raises(pl.PolyloopError, match="cache_share"):
        pl.auto_schedule(_transposed_product(), cache_share=bad)
