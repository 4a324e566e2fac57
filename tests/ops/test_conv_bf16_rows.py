# SPDX-License-Identifier: Apache-2.0
"""``conv2d_bf16_rows``: the bf16 convolution tiled along rows of output pixels (NCHW in and
out) against a float64 convolution of the bfloat16-rounded input and weights: odd channel
counts (a zero channel in the last pair), output channels no multiple of the tile's, rows of
pixels no multiple of the tile's, a symbolic batch, poisoned outputs, the host's tile and the
portable one."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays (extra 'bf16')")


def bf(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 (to nearest even), as float64."""
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def reference(x, w, b, pad, rounding=bf):
    x, w = rounding(x), rounding(w)
    n, _, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - r + 1, wd + 2 * pad - s + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            out += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("c_in,k_out,size,kernel,pad,intrin", [
    (7, 37, (5, 41), 3, 1, None),                                 # odd C and K, 32 + 9 pixels
    (16, 24, (3, 34), 1, 0, None),                                # 1 x 1: the plain tile
    (5, 13, (4, 11), 5, 2, "pl_lowbit_bf16_portable_6x32_win")])  # the portable body
def test_rows_conv_equals_the_rounded_reference(rng, c_in, k_out, size, kernel, pad, intrin):
    n = pl.var("n")
    X = pl.placeholder((n, c_in, *size), "float32", name="X")
    w = rng.standard_normal((k_out, c_in, kernel, kernel)).astype(np.float32)
    packed = ops.pack_bf16_conv_rows_weight(w)
    P = pl.placeholder(packed.shape, "bfloat16", name="P")
    B = pl.placeholder((k_out,), "float32", name="B")
    y = ops.conv2d_bf16_rows(X, P, padding=pad, bias=B)
    mod = pl.build(ops.schedule_conv2d_bf16_rows(y, intrin=intrin))
    x = rng.standard_normal((2, c_in, *size)).astype(np.float32)
    b = rng.standard_normal(k_out).astype(np.float32)
    ref = reference(x, w, b, pad)
    out = np.full(ref.shape, np.nan, np.float32)
    mod(X=x, P=packed, B=b, Y=out)
    assert not np.isnan(out).any(), "an output element was not written"
    scale = np.abs(ref).max()
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5 * scale)
    # rounding toward zero (or no rounding) instead of to nearest even is told apart
    trunc = lambda a: (np.asarray(a, np.float32).view(np.uint32) & 0xFFFF0000).view(   # noqa
        np.float32).astype(np.float64)
    assert np.abs(out - reference(x, w, b, pad, trunc)).max() > 1e-3 * scale


def test_rows_weights_are_paired_channels(rng):
    w = rng.standard_normal((3, 5, 2, 1)).astype(np.float32)
    p = ops.pack_bf16_conv_rows_weight(w)
    assert p.shape == (3, 2, 1, 3, 2) and p.dtype == ml_dtypes.bfloat16
    assert p[2, 1, 0, 1, 1] == w[2, 3, 1, 0].astype(ml_dtypes.bfloat16)
    assert p[1, 0, 0, 2, 1] == 0                                 # channel 5: past C


def test_rows_conv_bad_requests():
    X = pl.placeholder((1, 6, 8, 8), "float32", name="X")
    with pytest.raises(pl.ScheduleError, match="does not hold weights of 6 input channels"):
        ops.conv2d_bf16_rows(X, pl.placeholder((4, 3, 3, 4, 2), "bfloat16", name="P"))
    with pytest.raises(pl.ScheduleError, match=r"\(K, R, S, C / 2, 2\) bfloat16"):
        ops.conv2d_bf16_rows(X, pl.placeholder((4, 3, 3, 3, 2), "float32", name="P"))
    with pytest.raises(pl.ScheduleError, match="bias must be a float32 vector of 4"):
        ops.conv2d_bf16_rows(X, pl.placeholder((4, 1, 1, 3, 2), "bfloat16", name="P"),
                             bias=pl.placeholder((5,), "float32", name="B"))
    with pytest.raises(pl.ScheduleError, match="expected the result of conv2d_bf16_rows"):
        ops.schedule_conv2d_bf16_rows(X)
