# SPDX-License-Identifier: Apache-2.0
"""The generated space: its draws are legal schedules that compute what the program computes
(symbolic and awkward sizes, outputs poisoned), it contains the hand schedule's structure,
and its tiling parallelizes a loop with more than one iteration."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ops import conv2d_nchw
from polyloop.tune.space import draw, generated_space, try_draw


def _matmul_relu(n):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return pl.to_program(pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D"))


@pytest.mark.parametrize("seed", range(6))
def test_draws_compute_the_program(seed):
    sch, why = try_draw(_matmul_relu(pl.var("n")), generated_space, seed=seed)
    if sch is None:
        pytest.skip(f"draw {seed} refused: {why}")   # a refusal is a legal outcome
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((37, 37)).astype("float32") for _ in range(2))
    d = np.full((37, 37), np.nan, "float32")
    pl.build(sch)(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_space_holds_the_hand_schedule_structure():
    # strategy "tile" (index 1), vector loop j, row loop i, 4 vectors, pack B, rows 6, pack per panel
    sch = draw(_matmul_relu(96), generated_space,
               decisions=[1, 0, 0, 3, 0, [16, 1, 6], 0])
    text = str(sch.trace)
    for step in ("transform_layout", "cache_write", "'local'", "parallel", "unroll",
                 "vectorize", "decompose_reduction", "reverse_compute_inline",
                 "reverse_compute_at", "compute_at(sch.get_block('B_packed_in')"):
        assert step in text, step


def test_tiling_parallelizes_a_loop_with_several_iterations():
    X = pl.placeholder((1, 4, 9, 11), "float32", name="X")
    W = pl.placeholder((5, 4, 3, 3), "float32", name="W")
    prog = pl.to_program(conv2d_nchw(X, W, 1))
    for seed in range(4):
        sch, _ = try_draw(prog, generated_space, seed=seed, decisions=[None, 1])
        if sch is None:
            continue
        for loop in _parallel_loops(sch):
            assert loop != "n", str(sch.trace)


def _parallel_loops(sch):
    return [line.split("for ")[1].split(" in")[0] for line in str(sch).splitlines()
            if "parallel(" in line]
