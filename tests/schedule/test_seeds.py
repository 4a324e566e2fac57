# SPDX-License-Identifier: Apache-2.0
"""The schedules of the seed documents, end to end: seed 001's batched matmul + ReLU and its
convolution schedule, written with polyloop's primitives, give NumPy's results."""
from __future__ import annotations

import numpy as np

import polyloop as pl

from .programs import (check_conv, conv2d, indent_of, lines, poisoned, raises_schedule_error)


def bmm_relu(batch: int = 16, size: int = 128):
    A = pl.placeholder((batch, size, size), "float32", name="A")
    B = pl.placeholder((batch, size, size), "float32", name="B")
    k = pl.reduce_axis((0, size), name="k")
    Y = pl.compute((batch, size, size), lambda b, i, j: pl.sum(A[b, i, k] * B[b, k, j], axis=k),
                   name="Y")
    return pl.compute((batch, size, size), lambda b, i, j: pl.maximum(Y[b, i, j], 0.0), name="C")


def seed_001_bmm_schedule(out) -> pl.Schedule:
    sch = pl.Schedule(out)
    Y = sch.get_block("Y")
    b, i, j, k = sch.get_loops(Y)
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(b, i, j0, k, j1)
    sch.parallel(b)
    C = sch.get_block("C")
    sch.reverse_compute_at(C, j0)
    init = sch.decompose_reduction(Y, k)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.vectorize(sch.get_loops(C)[-1])
    k0, k1 = sch.split(k, factors=[None, 4])
    sch.unroll(k1)
    return sch


def test_seed_001_batched_matmul_relu_schedule(rng):
    sch = seed_001_bmm_schedule(bmm_relu())
    assert lines(sch) == [
        "for b in parallel(16):",
        "for i in range(128):",
        "for j_0 in range(16):",
        "for j in vectorized(8 * j_0, 8 * j_0 + 8):",
        "Y[b, i, j] = 0.0",
        "for k_0 in range(32):",
        "for k_1 in unrolled(4):",
        "for j_1 in range(8):",
        "Y[b, i, 8 * j_0 + j_1] += A[b, i, 4 * k_0 + k_1] * B[b, 4 * k_0 + k_1, 8 * j_0 + j_1]",
        "for j in vectorized(8 * j_0, 8 * j_0 + 8):",
        "C[b, i, j] = max(Y[b, i, j], 0.0)",
    ]
    assert [s.primitive for s in sch.trace if s.primitive != "get_loops"] == [
        "split", "reorder", "parallel", "reverse_compute_at", "decompose_reduction",
        "vectorize", "vectorize", "split", "unroll"]
    mod = pl.build(sch)
    a, b = rng.standard_normal((2, 16, 128, 128), dtype="float32")
    c = poisoned((16, 128, 128))
    mod(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a.astype("float64") @ b, 0.0), rtol=1e-4, atol=1e-4)
    src = mod.source
    assert "#pragma omp parallel for" in src
    assert src.count("explicit vectors of") == 2
    assert "#pragma GCC unroll 4" in src


def test_seed_001_schedule_at_an_awkward_size(rng):
    """The same steps on 3 x 21 x 21: j and k do not divide by 8 and 4."""
    sch = seed_001_bmm_schedule(bmm_relu(3, 21))
    a, b = rng.standard_normal((2, 3, 21, 21), dtype="float32")
    c = poisoned((3, 21, 21))
    pl.build(sch)(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a.astype("float64") @ b, 0.0), rtol=1e-4, atol=1e-4)


def test_seed_001_order_matters_relu_cannot_go_inside_the_reduction():
    """reverse_compute_at into k would run ReLU before the sum is complete: it is placed in
    the last k iteration instead, never earlier."""
    sch = pl.Schedule(bmm_relu(2, 16))
    b, i, j, k = sch.get_loops("Y")
    sch.reverse_compute_at("C", k)
    text = lines(sch)
    assert text[-3:] == ["for k in range(16):", "Y[b, i, j] += A[b, i, k] * B[b, k, j]",
                         "C[b, i, j] = max(Y[b, i, j], 0.0)"]
    assert indent_of(sch, "C[b, i, j] = max") == indent_of(sch, "for k in range(16):")


def test_seed_001_conv_schedule(rng):
    """compute_inline of the padding, splits, reorder with the reduction loops in the middle,
    fuse the outer tile loops (parallel) and the inner pairs (unroll, vectorize)."""
    shape = (4, 2, 6, 9, 7)                  # batch, cin, cout, h, w
    sch = pl.Schedule(conv2d(*shape))
    sch.compute_inline(sch.get_block("P"))
    conv = sch.get_block("O")
    i0, i1, i2, i3, i4, i5, i6 = sch.get_loops(conv)
    i0_0, i0_1 = sch.split(i0, factors=[2, 2])
    i1_0, i1_1 = sch.split(i1, factors=[None, 4])
    i2_0, i2_1 = sch.split(i2, factors=[None, 2])
    i3_0, i3_1 = sch.split(i3, factors=[None, 2])
    sch.reorder(i0_0, i1_0, i2_0, i3_0, i4, i5, i6, i0_1, i1_1, i2_1, i3_1)
    outer = sch.fuse(i0_0, i1_0, i2_0, i3_0)
    sch.parallel(outer)
    a = sch.fuse(i0_1, i1_1)
    v = sch.fuse(i2_1, i3_1)
    sch.unroll(a)
    sch.vectorize(v)
    sch.decompose_reduction(conv, i4)
    text = lines(sch)
    assert text[0] == "for b_0_o_0_y_0_x_0_fused in parallel(80):"     # 2 * 2 * 5 * 4
    assert any(t.startswith("for b_1_o_1_fused in unrolled(") for t in text)
    assert any(t.startswith("for y_1_x_1_fused in vectorized(") for t in text)
    assert "where(" in str(sch) and "P[" not in str(sch)
    check_conv(sch, rng, shape)


def test_seed_001_conv_vectorizing_a_reduction_loop_is_refused():
    sch = pl.Schedule(conv2d(1, 2, 2, 5, 5))
    *_, rw = sch.get_loops("O")
    raises_schedule_error(lambda: sch.vectorize(rw), "cannot vectorize loop 'rw'",
                          "between updates of a reduction", "rfactor")
