# SPDX-License-Identifier: Apache-2.0
"""``schedule_matmul(prefetch=d)``: the packing of each B panel prefetches B's rows d ahead;
results equal NumPy for the register tile and the micro-kernel schedules at awkward sizes."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import intrin
from polyloop.ops import matmul, schedule_matmul


@pytest.mark.parametrize("knobs", [{}, {"intrin": "gemm"}, {"intrin": "gemm", "order": "kslice"}])
@pytest.mark.parametrize("m, n, k", [(1, 1, 2), (37, 45, 29), (13, 130, 17)])
def test_prefetching_packed_panels_keeps_numpy_results(rng, knobs, m, n, k):
    if knobs.get("intrin"):
        knobs = knobs | {"intrin": intrin.gemm_intrin(rows=8, cols=32)}
    A = pl.placeholder((m, k), "float32", name="A")
    B = pl.placeholder((k, n), "float32", name="B")
    mod = pl.build(schedule_matmul(matmul(A, B), prefetch=3, **knobs))
    if m > 1:
        assert "// prefetch: B for B_packed_in, 3 iterations ahead, read, locality 3" in mod.source
    a = rng.standard_normal((m, k), dtype="float32")
    b = rng.standard_normal((k, n), dtype="float32")
    out = np.full((m, n), np.nan, "float32")
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_prefetch_knob_is_checked():
    A, B = pl.placeholder((8, 8), name="A"), pl.placeholder((8, 8), name="B")
    with pytest.raises(pl.ScheduleError, match="prefetch must be a positive integer"):
        schedule_matmul(matmul(A, B), prefetch=-1)
    assert "prefetch" not in schedule_matmul(matmul(A, B)).show()
