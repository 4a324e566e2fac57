# SPDX-License-Identifier: Apache-2.0
"""Convolution operator schedules (polyloop.ops.conv) against a direct NumPy convolution.

Sizes divide neither the width tile, nor the channel block, nor the vector width; outputs are
passed in filled with NaN, so an element the kernel forgets to write shows up.
"""
from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import polyloop as pl
from polyloop import ops


def conv_reference(x, w, pad, depthwise=False):
    """Direct convolution: every output is the sum over its window (float64)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = sliding_window_view(xp, w.shape[2:], axis=(2, 3))      # n c y x r s
    if depthwise:
        return np.einsum("ncyxrs,crs->ncyx", windows, w[:, 0].astype(np.float64))
    return np.einsum("ncyxrs,kcrs->nkyx", windows, w.astype(np.float64))


def run(mod, inputs, shape):
    out = np.full(shape, np.nan, dtype=np.float32)
    mod(*inputs, out)
    return out


def conv_case(rng, n, c, h, w, k, r, pad, depthwise=False, sizes=None, **knobs):
    """Build (from symbolic ``sizes`` when given) and check one convolution."""
    shape = sizes or (n, c, h, w)
    X = pl.placeholder(shape, "float32", name="X")
    if depthwise:
        Wt = pl.placeholder((shape[1], 1, r, r), "float32", name="Wt")
        sch = ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt, pad), **knobs)
    else:
        Wt = pl.placeholder((k, shape[1], r, r), "float32", name="Wt")
        sch = ops.schedule_conv2d_nchw(ops.conv2d_nchw(X, Wt, pad), **knobs)
    return pl.build(sch)


def check(mod, rng, n, c, h, w, k, r, pad, depthwise=False):
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((c, 1, r, r) if depthwise else (k, c, r, r), dtype=np.float32)
    expected = conv_reference(x, wt, pad, depthwise)
    got = run(mod, (x, wt), expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


# (n, c, h, w, k, r, pad): odd sizes, a 1-pixel image, channels 1 / lanes - 1 / lanes + 1
CONV_CASES = [(1, 5, 9, 11, 7, 3, 1), (2, 3, 7, 13, 17, 3, 1), (1, 1, 1, 1, 1, 3, 1),
              (1, 4, 6, 5, 15, 1, 0), (1, 3, 8, 8, 33, 5, 2)]


@pytest.mark.parametrize("n, c, h, w, k, r, pad", CONV_CASES)
def test_conv2d_default_schedule_matches_numpy(rng, n, c, h, w, k, r, pad):
    mod = conv_case(rng, n, c, h, w, k, r, pad)
    check(mod, rng, n, c, h, w, k, r, pad)


@pytest.mark.parametrize("knobs", [dict(k_vectors=1, w_block=4, parallel="y"),
                                   dict(lanes=4, k_vectors=3, w_block=6)])
def test_conv2d_knobs_keep_the_result(rng, knobs):
    mod = conv_case(rng, 1, 5, 9, 11, 7, 3, 1, **knobs)
    check(mod, rng, 1, 5, 9, 11, 7, 3, 1)


def test_conv2d_symbolic_sizes_one_module_for_all(rng):
    sizes = tuple(pl.var(v) for v in ("N", "C", "H", "Wd"))
    X = pl.placeholder(sizes, "float32", name="X")
    Wt = pl.placeholder((pl.var("K"), sizes[1], 3, 3), "float32", name="Wt")
    mod = pl.build(ops.schedule_conv2d_nchw(ops.conv2d_nchw(X, Wt)))
    for n, c, h, w, k in [(1, 5, 9, 11, 7), (2, 3, 1, 1, 17), (1, 2, 13, 16, 33)]:
        check(mod, rng, n, c, h, w, k, 3, 1)


# depthwise: widths below, at and above the vector width and the widened row
@pytest.mark.parametrize("n, c, h, w, r, pad", [(1, 5, 7, 13, 3, 1), (2, 3, 9, 17, 3, 1),
                                                 (1, 2, 1, 1, 3, 1), (1, 4, 6, 16, 5, 2),
                                                 (1, 3, 5, 15, 3, 0)])
def test_depthwise_default_schedule_matches_numpy(rng, n, c, h, w, r, pad):
    mod = conv_case(rng, n, c, h, w, None, r, pad, depthwise=True)
    check(mod, rng, n, c, h, w, None, r, pad, depthwise=True)


@pytest.mark.parametrize("knobs", [dict(x_vectors=1, pad_in_channel=False),
                                   dict(lanes=4, x_vectors=3), dict(stream=True)])
def test_depthwise_knobs_keep_the_result(rng, knobs):
    mod = conv_case(rng, 1, 3, 7, 21, None, 3, 1, depthwise=True, **knobs)
    check(mod, rng, 1, 3, 7, 21, None, 3, 1, depthwise=True)


@pytest.mark.parametrize("w", [1, 15, 17, 50])
def test_depthwise_streamed_into_misaligned_output(rng, w):
    """stream=True: the output rows (whole-row vector loops, peeled at run time) are written
    with streaming stores; an output one element off a 64-byte boundary still comes out right."""
    X = pl.placeholder((1, 3, 4, w), "float32", name="X")
    Wt = pl.placeholder((3, 1, 3, 3), "float32", name="Wt")
    sch = ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt), stream=True)
    mod = pl.build(sch)
    x = rng.standard_normal((1, 3, 4, w), dtype=np.float32)
    wt = rng.standard_normal((3, 1, 3, 3), dtype=np.float32)
    raw = np.empty(12 * w + 32, np.float32)
    start = (-raw.ctypes.data) % 64 // 4 + 1
    out = raw[start:start + 12 * w].reshape(1, 3, 4, w)
    out[...] = np.nan
    mod(x, wt, out)
    np.testing.assert_allclose(out, conv_reference(x, wt, 1, True), rtol=1e-4, atol=1e-4)
    assert "nontemporal" in str(sch)
    if w > 16 and "avx512" in mod.source:
        assert "pl_store_stream_v16f(&dwconv" in mod.source


# the padding inlined into the sum (masked loads of the input in place): 1-row and 2-row images,
# widths 1, lanes - 1, lanes + 1, odd heights, a 5 x 5 window, no padding
@pytest.mark.parametrize("n, c, h, w, r, pad", [(1, 3, 1, 1, 3, 1), (1, 2, 2, 15, 3, 1),
                                                 (2, 3, 17, 17, 3, 1), (1, 2, 15, 33, 5, 2),
                                                 (1, 3, 5, 15, 3, 0)])
def test_depthwise_inline_pad_matches_numpy(rng, n, c, h, w, r, pad):
    mod = conv_case(rng, n, c, h, w, None, r, pad, depthwise=True, inline_pad=True)
    check(mod, rng, n, c, h, w, None, r, pad, depthwise=True)


def test_depthwise_whole_padding_pass_symbolic_sizes(rng):
    """Symbolic sizes inline the padding by default; the padded input made whole first, in
    parallel, stays a choice."""
    sizes = tuple(pl.var(v) for v in ("N", "C", "H", "Wd"))
    X = pl.placeholder(sizes, "float32", name="X")
    Wt = pl.placeholder((sizes[1], 1, 3, 3), "float32", name="Wt")
    sch = ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt),
                                             pad_in_channel=False, x_vectors=1)
    assert "X_pad[" in str(sch)
    mod = pl.build(sch)
    for n, c, h, w in [(1, 2, 1, 1), (1, 3, 2, 17), (2, 2, 15, 16)]:
        check(mod, rng, n, c, h, w, None, 3, 1, depthwise=True)


# strided: every stride, both ways of the column stride, sizes that divide neither the stride
# nor the vector width
@pytest.mark.parametrize("h, w, r, pad, stride, column_phases", [
    (15, 13, 3, 1, (2, 2), None), (14, 14, 5, 2, (2, 2), None), (9, 37, 3, 1, (2, 2), True),
    (11, 21, 5, 2, (1, 2), None), (10, 19, 3, 0, (2, 1), None), (7, 40, 3, 1, (3, 3), False),
    (12, 35, 5, 2, (2, 2), True)])
def test_depthwise_strided_matches_numpy(rng, h, w, r, pad, stride, column_phases):
    X = pl.placeholder((2, 3, h, w), "float32", name="X")
    Wt = pl.placeholder((3, 1, r, r), "float32", name="Wt")
    dw = ops.depthwise_conv2d_nchw(X, Wt, pad, stride=stride, column_phases=column_phases)
    mod = pl.build(ops.schedule_depthwise_conv2d_nchw(dw))
    x = rng.standard_normal((2, 3, h, w), dtype=np.float32)
    wt = rng.standard_normal((3, 1, r, r), dtype=np.float32)
    expected = conv_reference(x, wt, pad, True)[:, :, ::stride[0], ::stride[1]]
    np.testing.assert_allclose(run(mod, (x, wt), expected.shape), expected, rtol=1e-4,
                               atol=1e-4)
    # a column stride reads column phases unless told to sum every column of the span
    assert ("X_phases" in mod.source) == (stride[1] > 1 and column_phases is not False)


def test_depthwise_default_padding_by_plane_size():
    """A padded plane of whole-vector rows that fits in L1 is made per channel; a bigger one,
    or one whose rows are widened to whole vectors (7 x 7), is not made at all."""
    def text(hw):
        X = pl.placeholder((1, 2, hw, hw), "float32", name="X")
        Wt = pl.placeholder((2, 1, 3, 3), "float32", name="Wt")
        return str(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt),
                                                      lanes=16))
    small, big, narrow = text(64), text(96), text(7)
    assert "X_pad_local[" in small
    for inlined in (big, narrow):
        assert "X_pad" not in inlined and "where(" in inlined
        assert "X[0, ch, y" in inlined


def test_depthwise_inline_pad_loads_are_zero_masked_without_blend(rng):
    """AVX-512: where(inside, X[...], 0) is one zero-masking load (no blend with zeros)."""
    X = pl.placeholder((1, 2, 6, 40), "float32", name="X")
    Wt = pl.placeholder((2, 1, 3, 3), "float32", name="Wt")
    mod = pl.build(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt),
                                                      inline_pad=True))
    check(mod, rng, 1, 2, 6, 40, None, 3, 1, depthwise=True)
    if "avx512" in mod.source:
        assert "pl_load_where_bits_v16f(&X[" in mod.source
        assert "pl_select_bits" not in mod.source


# rows summed together, tap by tap: the default (a divisor of the height: 7, 3, 4 rows), and
# tiles of rows that do not divide the height (a partial last tile)
@pytest.mark.parametrize("h, w, r, pad, y_rows", [(7, 7, 5, 2, None), (9, 5, 3, 1, None),
                                                   (12, 20, 3, 1, None), (7, 13, 5, 2, 3),
                                                   (11, 30, 3, 1, 4)])
def test_depthwise_row_tiles_match_numpy(rng, h, w, r, pad, y_rows):
    mod = conv_case(rng, 1, 3, h, w, None, r, pad, depthwise=True, y_rows=y_rows)
    check(mod, rng, 1, 3, h, w, None, r, pad, depthwise=True)


def test_depthwise_row_tile_rows_by_default():
    """A plane of one vector per row sums its rows together (independent FMA chains)."""
    X = pl.placeholder((1, 2, 7, 7), "float32", name="X")
    Wt = pl.placeholder((2, 1, 5, 5), "float32", name="Wt")
    text = str(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt, 2),
                                                  lanes=16))
    assert "for y_1 in unrolled(7):" in text
    with pytest.raises(pl.ScheduleError, match="y_rows must be a positive integer"):
        ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt, 2), y_rows=0)


def test_depthwise_row_tile_is_the_whole_row():
    X = pl.placeholder((1, 2, 4, 96), "float32", name="X")
    Wt = pl.placeholder((2, 1, 3, 3), "float32", name="Wt")
    text = str(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt), lanes=16))
    assert "for x_1 in unrolled(6):" in text and "nontemporal" not in text


def test_depthwise_rows_widened_to_whole_vectors():
    X = pl.placeholder((1, 2, 5, 21), "float32", name="X")
    Wt = pl.placeholder((2, 1, 3, 3), "float32", name="Wt")
    out = ops.depthwise_conv2d_nchw(X, Wt, row_multiple=16)
    assert [int(str(d)) for d in out.inputs[0].shape] == [1, 2, 5, 32]
    assert [int(str(d)) for d in out.shape] == [1, 2, 5, 21]


def test_depthwise_symbolic_sizes(rng):
    sizes = tuple(pl.var(v) for v in ("N", "C", "H", "Wd"))
    X = pl.placeholder(sizes, "float32", name="X")
    Wt = pl.placeholder((sizes[1], 1, 3, 3), "float32", name="Wt")
    mod = pl.build(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(X, Wt)))
    for n, c, h, w in [(1, 5, 9, 11), (2, 3, 1, 1), (1, 2, 13, 33)]:
        check(mod, rng, n, c, h, w, None, 3, 1, depthwise=True)


def test_conv_bad_arguments_are_clear_errors():
    X = pl.placeholder((1, 3, 8, 8), "float32", name="X")
    with pytest.raises(pl.ScheduleError, match="3 channels, weight expects 4"):
        ops.conv2d_nchw(X, pl.placeholder((5, 4, 3, 3), "float32", name="Wt"))
    with pytest.raises(pl.ScheduleError, match="pad must be a non-negative integer"):
        ops.conv2d_nchw(X, pl.placeholder((5, 3, 3, 3), "float32", name="Wt"), pad=-1)
    with pytest.raises(pl.ScheduleError, match=r"weight must be \(C, 1, R, S\)"):
        ops.depthwise_conv2d_nchw(X, pl.placeholder((3, 3, 3, 3), "float32", name="Wt"))
    conv = ops.conv2d_nchw(X, pl.placeholder((5, 3, 3, 3), "float32", name="Wt"))
    with pytest.raises(pl.ScheduleError, match="w_block must be a positive integer"):
        ops.schedule_conv2d_nchw(conv, w_block=0)
    with pytest.raises(pl.ScheduleError, match="parallel must be 'k'"):
        ops.schedule_conv2d_nchw(conv, parallel="x")
    with pytest.raises(pl.ScheduleError, match="expected the result of depthwise_conv2d_nchw"):
        ops.schedule_depthwise_conv2d_nchw(conv)
    dw = ops.depthwise_conv2d_nchw(X, pl.placeholder((3, 1, 3, 3), "float32", name="Wt"))
    with pytest.raises(pl.ScheduleError, match="inline_pad and pad_in_channel exclude"):
        ops.schedule_depthwise_conv2d_nchw(dw, inline_pad=True, pad_in_channel=True)
