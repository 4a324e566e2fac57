# SPDX-License-Identifier: Apache-2.0
"""Batched low-bit products (both operands with batch axes: attention's), constant and
symbolic batches, against NumPy, every output element written. The right operand is packed
per matrix in a nest of its own (packed at a panel under the batch loops, its local copy was
declared twice in the generated C and the tiles read the unwritten one)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays (extra 'bf16')")


def bf(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


@pytest.mark.parametrize("lead, cols", [((1, 3), 40), (("b", 3), 24)])
def test_batched_bf16_product_of_float32_operands(lead, cols):
    sizes = {"b": 2}
    shape = tuple(pl.var(d) if isinstance(d, str) else d for d in lead)
    A = pl.placeholder((*shape, 13, 37), "float32", name="A")
    B = pl.placeholder((*shape, 37, cols), "float32", name="B")
    mod = pl.build(ops.schedule_matmul_bf16(ops.matmul_bf16(A, B), panels=2))
    real = tuple(sizes.get(d, d) for d in lead)
    rng = np.random.default_rng(len(lead))
    a = rng.standard_normal((*real, 13, 37)).astype(np.float32)
    b = rng.standard_normal((*real, 37, cols)).astype(np.float32)
    out = np.full((*real, 13, cols), np.nan, np.float32)
    mod(a, b, out)
    ref = bf(a) @ bf(b)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_batched_int8_product_is_exact():
    cols = 40
    A = pl.placeholder((3, 16, 64), "uint8", name="A")
    B = pl.placeholder((3, 64, cols), "int8", name="B")
    # two panels per block: one block holds all columns (its loop has one iteration)
    mod = pl.build(ops.schedule_matmul_int8(ops.matmul_int8(A, B), panels=2))
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 16, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (3, 64, cols)).astype(np.int8)
    out = np.full((3, 16, cols), -7, np.int32)
    mod(a, b, out)
    np.testing.assert_array_equal(out, a.astype(np.int32) @ b.astype(np.int32))
