# SPDX-License-Identifier: Apache-2.0
"""Strided convolutions (polyloop.ops.conv2d_nchw with stride) against PyTorch's conv2d.

Sizes divide neither the width tile, nor the channel block, nor the vector width, and the
padded input's last row/column is not always reached by the stride; outputs are passed in
filled with NaN, so an element the kernel forgets to write shows up.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch", reason="the reference is torch.nn.functional.conv2d "
                                           "(extra 'graph')")


def reference(x, w, pad, stride):
    with torch.no_grad():
        return torch.nn.functional.conv2d(torch.from_numpy(x).double(),
                                          torch.from_numpy(w).double(),
                                          padding=pad, stride=stride).numpy()


def check(mod, rng, n, c, h, w, k, r, pad, stride):
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, r), dtype=np.float32)
    expected = reference(x, wt, pad, stride)
    out = np.full(expected.shape, np.nan, dtype=np.float32)
    mod(x, wt, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def build(shape, k, r, pad, stride, **knobs):
    X = pl.placeholder(shape, "float32", name="X")
    Wt = pl.placeholder((k, shape[1], r, r), "float32", name="Wt")
    return pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw(X, Wt, pad, stride), **knobs))


# (n, c, h, w, k, r, pad, stride): a stem (7x7, 3 channels), a 1x1 downsample, a 3x3 one,
# stride 3, odd sizes, a window that only fits once
STRIDED = [(1, 3, 23, 21, 20, 7, 3, 2), (1, 6, 13, 11, 33, 1, 0, 2), (2, 5, 12, 15, 17, 3, 1, 2),
           (1, 4, 11, 13, 9, 3, 1, 3), (1, 2, 5, 6, 3, 5, 0, 2)]


@pytest.mark.parametrize("n, c, h, w, k, r, pad, stride", STRIDED)
def test_strided_conv2d_matches_torch(rng, n, c, h, w, k, r, pad, stride):
    mod = build((n, c, h, w), k, r, pad, stride)
    check(mod, rng, n, c, h, w, k, r, pad, stride)


@pytest.mark.parametrize("knobs", [dict(k_vectors=1, w_block=3, parallel="y"),
                                   dict(lanes=4, k_vectors=3, w_block=5)])
def test_strided_conv2d_knobs_keep_the_result(rng, knobs):
    mod = build((1, 5, 15, 17), 19, 3, 1, 2, **knobs)
    check(mod, rng, 1, 5, 15, 17, 19, 3, 1, 2)


def test_strided_conv2d_symbolic_sizes(rng):
    sizes = tuple(pl.var(v) for v in ("N", "C", "H", "Wd"))
    mod = build(sizes, 7, 3, 1, 2)
    for n, c, h, w in [(1, 5, 9, 11), (2, 3, 1, 1), (1, 2, 14, 16)]:
        check(mod, rng, n, c, h, w, 7, 3, 1, 2)


def test_stride_must_be_a_positive_integer():
    X = pl.placeholder((1, 3, 8, 8), name="X")
    Wt = pl.placeholder((4, 3, 3, 3), name="Wt")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(pl.ScheduleError, match="stride must be a positive integer"):
            ops.conv2d_nchw(X, Wt, 1, bad)


def test_a_window_larger_than_the_padded_input_is_refused():
    X = pl.placeholder((1, 3, 4, 4), name="X")
    Wt = pl.placeholder((4, 3, 5, 5), name="Wt")
    with pytest.raises(pl.ScheduleError, match="window does not fit"):
        ops.conv2d_nchw(X, Wt, 0, 2)


@pytest.mark.parametrize("n, stride, knobs", [(5, 1, {}), (6, 2, {}), (4, 1, {"parallel": "k"})])
def test_a_batch_runs_its_images_in_parallel(rng, n, stride, knobs):
    X = pl.placeholder((n, 3, 13, 11), "float32", name="X")
    Wt = pl.placeholder((20, 3, 3, 3), "float32", name="Wt")
    sch = ops.schedule_conv2d_nchw(ops.conv2d_nchw(X, Wt, 1, stride), **knobs)
    parallel = [s for s in str(sch.trace).splitlines() if ".parallel(" in s]
    # the default puts one parallel region around the batch (its loop is the block's first)
    loops = next(s for s in str(sch.trace).splitlines()
                 if s.endswith("= sch.get_loops(sch.get_block('conv'))"))
    n_loop = loops.split(",")[0].strip()
    assert (f"sch.parallel({n_loop})" in parallel) == (knobs == {}), parallel
    check(pl.build(sch), rng, n, 3, 13, 11, 20, 3, 1, stride)
