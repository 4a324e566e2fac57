# SPDX-License-Identifier: Apache-2.0
"""int8 and bfloat16 matmul operators against NumPy: exact int32 results for every pair of
8-bit operand types with zero points (per tensor and per column), symbolic and odd sizes,
lengths of k that are no multiple of the group, batches, packed weights, the requantized and
dequantized epilogues, and the int32 bound."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops


def integers(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def exact(a, b, za, zb):
    """NumPy's int32 product of the operands minus their zero points."""
    return (a.astype(np.int32) - np.int32(za)) @ (b.astype(np.int32) - zb.astype(np.int32))


# uint8 x int8 needs no offset, int8 x uint8 both (the other pairs: the tests below)
@pytest.mark.parametrize("a_type, b_type", [("uint8", "int8"), ("int8", "uint8")])
def test_operand_pairs_with_zero_points_are_exact(a_type, b_type, rng):
    """The +128 offsets and their compensation terms: NumPy's result, to the bit."""
    m, n, k = pl.var("m"), pl.var("n"), pl.var("k")
    A = pl.placeholder((m, k), a_type, name="A")
    B = pl.placeholder((k, n), b_type, name="B")
    ZA = pl.placeholder((), a_type, name="ZA")
    ZB = pl.placeholder((n,), b_type, name="ZB")
    mod = pl.build(ops.schedule_matmul_int8(ops.matmul_int8(A, B, a_zero_point=ZA,
                                                            b_zero_point=ZB)))
    for sm, sn, sk in [(1, 1, 1), (7, 33, 13), (37, 70, 64), (13, 95, 3), (5, 40, 0)]:
        a, b = integers(rng, a_type, (sm, sk)), integers(rng, b_type, (sk, sn))
        za, zb = np.array(integers(rng, a_type, ()), a_type), integers(rng, b_type, (sn,))
        out = np.full((sm, sn), -7, np.int32)
        mod(a, b, za, zb, out)
        np.testing.assert_array_equal(out, exact(a, b, za, zb), err_msg=f"{sm}x{sn}x{sk}")
    # zero points make products of up to 255 x 255: a symbolic k is bounded at each call
    with pytest.raises(pl.ArgumentError, match="k <= 33025"):
        mod(np.zeros((2, 40000), a_type), np.zeros((40000, 2), b_type), za, zb[:2])


def test_batched_requantized_with_bias_and_per_column_scales(rng):
    """QLinearMatMul-like: int8 x int8 batches, a constant zero point, int32 bias, per-column
    float32 scales and uint8 output zero points, halves to even."""
    p, m, n, k_len = pl.var("p"), pl.var("m"), pl.var("n"), 37
    A = pl.placeholder((p, m, k_len), "int8", name="A")
    B = pl.placeholder((p, k_len, n), "int8", name="B")
    S = pl.placeholder((n,), "float32", name="S")
    Z = pl.placeholder((n,), "uint8", name="Z")
    bias = pl.placeholder((n,), "int32", name="bias")
    y = ops.matmul_int8(A, B, a_zero_point=-3, bias=bias, scale=S, out_zero_point=Z,
                        out_dtype="uint8")
    mod = pl.build(ops.schedule_matmul_int8(y))
    for sp, sm, sn in [(1, 1, 1), (3, 13, 45), (2, 6, 64)]:
        a, b = integers(rng, "int8", (sp, sm, k_len)), integers(rng, "int8", (sp, k_len, sn))
        s = rng.uniform(1e-4, 1e-2, sn).astype(np.float32)
        z = integers(rng, "uint8", (sn,))
        bi = rng.integers(-5000, 5000, sn).astype(np.int32)
        out = np.full((sp, sm, sn), 7, np.uint8)
        mod(a, b, s, z, bi, out)
        acc = (a.astype(np.int32) + 3) @ b.astype(np.int32) + bi
        ref = np.clip(np.round(acc.astype(np.float32) * s) + z.astype(np.float32), 0, 255)
        np.testing.assert_array_equal(out, ref.astype(np.uint8))


def test_shared_weights_packed_ahead_and_dequantized(rng):
    """uint8 x uint8 with B packed once (shifted into int8 panels), and B shared by a batch."""
    m, k_len, n = pl.var("m"), 37, 70
    b = integers(rng, "uint8", (k_len, n))
    packed = ops.pack_int8_weight(b)
    A = pl.placeholder((m, k_len), "uint8", name="A")
    P = pl.placeholder(packed.shape, "int8", name="P")
    mod = pl.build(ops.schedule_matmul_int8(ops.matmul_int8_packed(
        A, P, n, b_dtype="uint8", a_zero_point=5, b_zero_point=3)))
    for sm in (1, 7, 50):
        a = integers(rng, "uint8", (sm, k_len))
        np.testing.assert_array_equal(mod(a, packed), exact(a, b, 5, np.full(n, 3)))
    p = pl.var("p")
    A3 = pl.placeholder((p, m, k_len), "uint8", name="A")
    B2 = pl.placeholder((k_len, n), "int8", name="B")
    mod = pl.build(ops.schedule_matmul_int8(ops.matmul_int8(A3, B2, scale=0.5,
                                                            out_dtype="float32")))
    a, w = integers(rng, "uint8", (3, 17, k_len)), integers(rng, "int8", (k_len, n))
    out = np.full((3, 17, n), np.nan, np.float32)
    mod(a, w, out)
    np.testing.assert_array_equal(out, (a.astype(np.int32) @ w.astype(np.int32))
                                  .astype(np.float32) * np.float32(0.5))


def test_int32_bound_refused():
    with pytest.raises(pl.ScheduleError, match="70000 products of up to 255 x 128 may overflow"):
        ops.matmul_int8(pl.placeholder((4, 70000), "uint8", name="A"),
                        pl.placeholder((70000, 4), "int8", name="B"))
    with pytest.raises(pl.ScheduleError, match="packed in panels of 16 columns"):
        P = pl.placeholder(ops.pack_int8_weight(np.zeros((8, 8), np.int8), 16).shape, "int8",
                           name="P")
        ops.schedule_matmul_int8(ops.matmul_int8_packed(
            pl.placeholder((4, 8), "uint8", name="A"), P, 8), rows=6, cols=32)


def test_bf16_matmul_with_bias_and_rounded_output(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    m, n, k = pl.var("m"), pl.var("n"), pl.var("k")
    A = pl.placeholder((m, k), "bfloat16", name="A")
    B = pl.placeholder((k, n), "bfloat16", name="B")
    bias = pl.placeholder((n,), "float32", name="bias")
    mod = pl.build(ops.schedule_matmul_bf16(ops.matmul_bf16(A, B, bias=bias,
                                                            out_dtype="bfloat16")))
    for sm, sn, sk in [(1, 1, 1), (7, 33, 13), (37, 70, 64), (5, 40, 0)]:
        a = rng.standard_normal((sm, sk)).astype(bf16)
        b = rng.standard_normal((sk, sn)).astype(bf16)
        bi = rng.standard_normal(sn).astype(np.float32)
        out = np.full((sm, sn), np.nan, bf16)
        mod(a, b, bi, out)
        ref = a.astype(np.float32) @ b.astype(np.float32) + bi
        # the float32 sum may differ in its last bits; rounding to bfloat16 then by one step
        np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2**-7, atol=1e-5)
