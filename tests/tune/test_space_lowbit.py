# SPDX-License-Identifier: Apache-2.0
"""The generated space tensorizes an int8 matmul (with a requantized result) with the host's
dot-product tile; the drawn schedule computes NumPy's result."""
from __future__ import annotations

import numpy as np

import polyloop as pl
from polyloop.tune import rules, rules_lowbit
from polyloop.tune.space import draw, generated_space


def test_int8_matmul_draws_the_lowbit_tile(rng):
    A = pl.placeholder((50, 64), "uint8", name="A")
    B = pl.placeholder((64, 70), "int8", name="B")
    k = pl.reduce_axis((0, 64), name="k")
    C = pl.compute((50, 70), lambda i, j: pl.sum(A[i, k].astype("int32")
                                                 * B[k, j].astype("int32"), axis=k), name="C")
    D = pl.compute((50, 70), lambda i, j: pl.requantize(C[i, j], 0.01, 3, "int8"), name="D")
    prog = pl.to_program(D)
    sch = pl.Schedule(prog)
    assert rules_lowbit.lowbit_family(sch, rules.block_shape(sch, "C")) == "u8s8"
    # the strategy "lowbit" (after polyhedral and tile), the first tile of the host's body,
    # 2 panels per block, B packed first
    sch = draw(prog, generated_space, decisions=[2, 0, 1, 1])
    assert "tensorize=pl_lowbit_u8s8_" in str(sch)
    a = rng.integers(0, 256, (50, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 70)).astype(np.int8)
    exact = (a.astype(np.int32) @ b.astype(np.int32)).astype(np.float32)
    ref = np.clip(np.round(exact * np.float32(0.01)) + 3, -128, 127).astype(np.int8)
    out = np.full((50, 70), 99, np.int8)
    pl.build(sch)(a, b, out)
    np.testing.assert_array_equal(out, ref)
