# SPDX-License-Identifier: Apache-2.0
"""A read guarded by where() runs only where its condition holds; copies made by cache_read
and vector loads must not read outside the array where it does not (there the guarded index is
out of range: A[i - 1] at i = 0)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def shifted():
    """P[i, j] = A[i - 1, j] for i >= 1, else 0, over n + 1 rows; Q sums two rows of P."""
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    P = pl.compute((n + 1, m), lambda i, j: pl.where(i >= 1, A[i - 1, j], 0.0), name="P")
    return pl.compute((n, m), lambda i, j: P[i, j] + P[i + 1, j] * 3.0, name="Q")


def reference(a: np.ndarray) -> np.ndarray:
    p = np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a])
    return p[:-1] + p[1:] * 3.0


def check(mod, rng, sizes=((1, 1), (5, 7), (12, 19))):
    for n, m in sizes:
        a = rng.standard_normal((n, m), dtype="float32")
        q = np.full((n, m), np.nan, "float32")
        mod(a, q)
        np.testing.assert_allclose(q, reference(a), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("scope", ["global", "local"])
def test_cache_read_copies_only_elements_inside_the_buffer(rng, scope):
    sch = pl.Schedule(shifted())
    sch.cache_read("P", "A", scope)
    text = str(sch)
    assert "for ax0 in range(n):" in text and "range(-1" not in text, text
    if scope == "global":
        check(pl.build(sch), rng)


def test_vectorized_guarded_read_is_loaded_only_where_the_guard_holds(rng):
    sch = pl.Schedule(shifted())
    _, j = sch.get_loops("P")
    sch.vectorize(sch.split(j, factors=[None, 8])[1])
    mod = pl.build(sch)
    reads = [line for line in mod.source.splitlines() if "A[i - 1]" in line]
    assert reads and all("(i >= 1) ?" in line or "i >= 1 ?" in line for line in reads), reads
    check(mod, rng)
