# SPDX-License-Identifier: Apache-2.0
"""The rules of the generated space on a convolution and on PolyBench-style scripts: the conv
draws the hand schedule's structure (packed weights, a pixel-major local tile, channel blocks
in parallel), a script's matrix product is split from its scaling nest and tiled, and every
draw computes what NumPy computes (sizes no tile divides, outputs poisoned with NaN)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ops import conv2d_nchw
from polyloop.runtime.records import Status
from polyloop.tune.measure import LocalRunner, build_one
from polyloop.tune.space import draw, generated_space, try_draw


def _conv_numpy(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.einsum("bcyxrs,kcrs->bkyx", win, w)


def _conv(c, h, w, k):
    X = pl.placeholder((1, c, h, w), "float32", name="X")
    W = pl.placeholder((k, c, 3, 3), "float32", name="W")
    return pl.to_program(conv2d_nchw(X, W, 1))


def _check_conv(sch, c, h, w, k, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, h, w)).astype("float32")
    wt = rng.standard_normal((k, c, 3, 3)).astype("float32")
    out = np.full((1, k, h, w), np.nan, "float32")
    pl.build(sch)(x, wt, out)
    np.testing.assert_allclose(out, _conv_numpy(x, wt), rtol=1e-4, atol=1e-4)


def test_conv_draws_the_hand_schedule_structure():
    # the padding kept, register tiling, output pixels (x) as the row loop, 2 vectors of
    # channels, rows of 8 pixels, channel blocks outermost, weights packed per block, the
    # padding nest in parallel
    sch = draw(_conv(6, 9, 11, 37), generated_space,
               decisions=[1, 1, 2, 1, [2, 1, 8], 1, 0, 0])
    text = str(sch.trace)
    lanes = 2 * pl.ops.knobs.default_lanes("float32")
    for step in (f"'W', lambda x0, x1, x2, x3: (x0 // {lanes}, x1, x2, x3, x0 % {lanes},)",
                 "'conv_local', lambda x0, x1, x2, x3: (x0, x2, x3, x1,)",
                 "cache_write(sch.get_block('conv'), 'local')",
                 "compute_at(sch.get_block('W_packed_in')", "decompose_reduction"):
        assert step in text, step
    parallel = [line.split("for ")[1].split(" in")[0] for line in str(sch).splitlines()
                if "parallel(" in line]
    assert parallel == ["ch", "k_0"], str(sch)      # padding channels, channel blocks
    _check_conv(sch, 6, 9, 11, 37, seed=0)


@pytest.mark.parametrize("seed", range(2))
def test_conv_tile_draws_compute_the_convolution(seed):
    sch, why = try_draw(_conv(5, 7, 10, 19), generated_space, seed=seed,
                        decisions=[None, 1])
    if sch is None:
        pytest.skip(f"draw {seed} refused: {why}")   # a refusal is a legal outcome
    _check_conv(sch, 5, 7, 10, 19, seed)


@pl.script
def gemm(C: pl.Buffer[("ni", "nj"), "float64"], A: pl.Buffer[("ni", "nk"), "float64"],
         B: pl.Buffer[("nk", "nj"), "float64"]):
    for i in range(ni):            # noqa: F821 - sizes are parameters
        for j in range(nj):        # noqa: F821
            C[i, j] *= 1.2
        for k in range(nk):        # noqa: F821
            for j in range(nj):    # noqa: F821
                C[i, j] += 1.5 * A[i, k] * B[k, j]


def _gemm_check(mod, ni, nj, nk, seed):
    rng = np.random.default_rng(seed)
    c, a, b = (rng.standard_normal(s) for s in ((ni, nj), (ni, nk), (nk, nj)))
    want = 1.2 * c + 1.5 * a @ b
    mod(c, a, b)
    np.testing.assert_allclose(c, want, rtol=1e-12, atol=1e-12)


def test_script_matmul_is_split_from_its_scaling_and_tiled():
    # register tiling of the update block C_1 (the scaling C stays a nest of its own): j as
    # the vector loop, i the rows, 2 vectors, B packed into panels, rows of 2, packed whole
    # first (per panel is refused with symbolic sizes: with ni = 0 no panel would be read)
    sch = draw(gemm, generated_space, decisions=[1, 0, 0, 1, 0, [None, 4, 2], 1, 0], seed=0)
    text = str(sch.trace)
    for step in ("distribute", "cache_write(sch.get_block('C_1'), 'local')",
                 "transform_layout(sch.get_block('C_1'), 'B'", "vectorize"):
        assert step in text, step
    _gemm_check(pl.build(sch), 21, 26, 13, seed=1)


class InProcessBuilder:
    def build(self, jobs):
        return [build_one(j) for j in jobs]


def test_a_polybench_script_tunes_and_equals_numpy(tmp_path):
    res = pl.tune(gemm, trials=2, strategy="random", seed=3, sizes={"ni": 19, "nj": 23, "nk": 11},
                  work_dir=str(tmp_path), runner=LocalRunner(repeat=1),
                  builder=InProcessBuilder())
    assert any(r.status is Status.OK for r in res.history)
    assert not any(r.status is Status.MISMATCH for r in res.history)
    _gemm_check(res.build(), 27, 17, 9, seed=2)
