# SPDX-License-Identifier: Apache-2.0
"""int8 and bfloat16 convolutions against PyTorch's float64 convolution of the same values:
exact int32 sums with zero points (per output channel for the weights), strides, padding,
channel counts that are no multiple of the group, batches; the depthwise int8 convolution."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops

torch = pytest.importorskip("torch")


def integers(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def reference(x, w, zx, zw, stride, pad, groups=1):
    """PyTorch's convolution of ``x - zx`` and ``w - zw`` in float64: exact for these sizes."""
    xt = torch.from_numpy(x.astype(np.float64) - zx)
    wt = torch.from_numpy(w.astype(np.float64) - zw.astype(np.float64).reshape(-1, 1, 1, 1))
    out = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=pad, groups=groups)
    return out.numpy().round().astype(np.int64)


def test_int8_conv_offsets_zero_points_and_strides(rng):
    """int8 x uint8 (both offsets), 13 channels (groups of 4 padded), stride 2, batch 2,
    per-channel weight zero points (the epilogues are matmul_int8's: tested there)."""
    x_shape, w_shape = (2, 13, 11, 10), (33, 13, 3, 3)
    X = pl.placeholder(x_shape, "int8", name="X")
    W = pl.placeholder(w_shape, "uint8", name="W")
    ZW = pl.placeholder((33,), "uint8", name="ZW")
    acc = ops.conv2d_int8(X, W, stride=2, padding=1, x_zero_point=-3, w_zero_point=ZW)
    mod = pl.build(ops.schedule_conv2d_int8(acc))
    x, w = integers(rng, "int8", x_shape), integers(rng, "uint8", w_shape)
    zw = integers(rng, "uint8", (33,))
    exact = reference(x, w, -3, zw, 2, 1)
    y = np.full(exact.shape, -7, np.int32)
    mod(x, w, zw, y)
    np.testing.assert_array_equal(y, exact)


def test_int8_pointwise_and_depthwise(rng):
    """A 1 x 1 convolution (uint8 x int8, no offset) and the depthwise convolution, one build."""
    X = pl.placeholder((1, 16, 9, 7), "uint8", name="X")
    W = pl.placeholder((40, 16, 1, 1), "int8", name="W")
    Wd = pl.placeholder((16, 1, 3, 3), "int8", name="Wd")
    point = ops.conv2d_int8(X, W, x_zero_point=7)
    depth = ops.depthwise_conv2d_int8(X, Wd, padding=1, x_zero_point=7, w_zero_point=-2)
    sch_p, sch_d = ops.schedule_conv2d_int8(point), ops.schedule_depthwise_conv2d_int8(depth)
    x = integers(rng, "uint8", (1, 16, 9, 7))
    w, d = integers(rng, "int8", (40, 16, 1, 1)), integers(rng, "int8", (16, 1, 3, 3))
    np.testing.assert_array_equal(pl.build(sch_p)(x, w), reference(x, w, 7, np.zeros(40), 1, 0))
    np.testing.assert_array_equal(pl.build(sch_d)(x, d),
                                  reference(x, d, 7, np.full(16, -2), 1, 1, groups=16))


def test_bf16_conv_with_bias(rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    X = pl.placeholder((1, 7, 9, 11), "bfloat16", name="X")
    W = pl.placeholder((37, 7, 3, 3), "bfloat16", name="W")
    bias = pl.placeholder((37,), "float32", name="bias")
    mod = pl.build(ops.schedule_conv2d_bf16(ops.conv2d_bf16(X, W, stride=2, padding=1,
                                                            bias=bias)))
    x = rng.standard_normal((1, 7, 9, 11)).astype(bf16)
    w = rng.standard_normal((37, 7, 3, 3)).astype(bf16)
    b = rng.standard_normal(37).astype(np.float32)
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.astype(np.float32)),
                                     torch.from_numpy(w.astype(np.float32)),
                                     torch.from_numpy(b), stride=2, padding=1).numpy()
    np.testing.assert_allclose(mod(x, w, b), ref, rtol=1e-4, atol=1e-4)


def test_conv_bad_requests():
    X = pl.placeholder((1, 5, 8, 8), "uint8", name="X")
    with pytest.raises(pl.ScheduleError, match="x has 5 channels, w expects 4"):
        ops.conv2d_int8(X, pl.placeholder((8, 4, 3, 3), "int8", name="W"))
    with pytest.raises(pl.ScheduleError, match="operand w must be a 4-D int8 or uint8"):
        ops.conv2d_int8(X, pl.placeholder((8, 5, 3, 3), "float32", name="W"))
    big = pl.placeholder((1, 8192, 8, 8), "uint8", name="B")
    with pytest.raises(pl.ScheduleError, match="73728 products of up to 254 x 128 may overflow"):
        ops.conv2d_int8(big, pl.placeholder((8, 8192, 3, 3), "int8", name="W"), x_zero_point=1)


@pytest.mark.parametrize("x_dtype,c_in,k_out,size,kernel,stride,pad", [
    ("uint8", 1, 9, (13, 11), 7, 2, 3),     # a grayscale stem
    ("int8", 3, 33, (11, 12), 5, 3, 2)])    # RGB, an int8 input (offset by 128), stride 3
def test_int8_conv_few_channels(rng, x_dtype, c_in, k_out, size, kernel, stride, pad):
    """Four input channels or fewer: one channel group per tap (the group's loop runs once),
    zero points on both sides, every output element written (poisoned output)."""
    x_shape, w_shape = (1, c_in, *size), (k_out, c_in, kernel, kernel)
    X = pl.placeholder(x_shape, x_dtype, name="X")
    W = pl.placeholder(w_shape, "int8", name="W")
    acc = ops.conv2d_int8(X, W, stride=stride, padding=pad, x_zero_point=5, w_zero_point=-2)
    mod = pl.build(ops.schedule_conv2d_int8(acc))
    x, w = integers(rng, x_dtype, x_shape), integers(rng, "int8", w_shape)
    exact = reference(x, w, 5, np.full(k_out, -2), stride, pad)
    y = np.full(exact.shape, -7, np.int32)
    mod(x, w, y)
    np.testing.assert_array_equal(y, exact)


def test_int8_conv_on_packed_weights(rng):
    """Weights packed once (uint8 weights: shifted by -128; 37 channels: a partial panel;
    7 input channels: a partial group) and their sums, an int8 input with a zero point: the
    exact sums; the sums left out where they are needed, or panels of another width, are
    refused by name."""
    x_shape, w_shape = (2, 7, 9, 8), (37, 7, 3, 3)
    w = integers(rng, "uint8", w_shape)
    panels, sums = ops.pack_conv_int8_weight(w)
    X = pl.placeholder((pl.var("n"), 7, 9, 8), "int8", name="X")
    P = pl.placeholder(panels.shape, "int8", name="P")
    S = pl.placeholder(sums.shape, "int32", name="S")
    acc = ops.conv2d_int8_packed(X, P, S, w_shape, w_dtype="uint8", stride=2, padding=1,
                                 x_zero_point=-4, w_zero_point=9)
    mod = pl.build(ops.schedule_conv2d_int8(acc))
    x = integers(rng, "int8", x_shape)
    exact = reference(x, w, -4, np.full(37, 9), 2, 1)
    y = np.full(exact.shape, -7, np.int32)
    mod(x, panels, sums, y)
    np.testing.assert_array_equal(y, exact)
    with pytest.raises(pl.ScheduleError, match="the weights' sums are needed"):
        ops.conv2d_int8_packed(X, P, None, w_shape, x_zero_point=1)
    with pytest.raises(pl.ScheduleError, match="does not hold weights of shape"):
        ops.conv2d_int8_packed(X, P, S, (37, 7, 5, 5))


@pytest.mark.parametrize("in_layout,out_layout,packed", [
    ("NHWC", "NHWC", True), ("NCHW", "NHWC", False)])
def test_int8_conv_channels_last(rng, in_layout, out_layout, packed):
    """Channels-last input and/or result (as consecutive int8 layers of a model pass them on):
    the exact sums, a symbolic batch, 13 input channels (a partial group), 37 outputs (a
    partial panel), stride 2, every output element written (poisoned); a bad layout is
    refused by name."""
    x_shape, w_shape = (2, 13, 9, 11), (37, 13, 3, 3)
    x, w = integers(rng, "int8", x_shape), integers(rng, "int8", w_shape)
    n = pl.var("n")
    dims = (n, 13, 9, 11) if in_layout == "NCHW" else (n, 9, 11, 13)
    X = pl.placeholder(dims, "int8", name="X")
    common = dict(stride=2, padding=1, x_zero_point=-4, w_zero_point=3,
                  in_layout=in_layout, out_layout=out_layout)
    if packed:
        panels, sums = ops.pack_conv_int8_weight(w)
        P = pl.placeholder(panels.shape, "int8", name="P")
        S = pl.placeholder(sums.shape, "int32", name="S")
        acc = ops.conv2d_int8_packed(X, P, S, w_shape, **common)
        weights = (panels, sums)
    else:
        acc = ops.conv2d_int8(X, pl.placeholder(w_shape, "int8", name="W"), **common)
        weights = (w,)
    mod = pl.build(ops.schedule_conv2d_int8(acc))
    exact = reference(x, w, -4, np.full(37, 3), 2, 1)
    if out_layout == "NHWC":
        exact = exact.transpose(0, 2, 3, 1)
    y = np.full(exact.shape, -7, np.int32)
    mod(x if in_layout == "NCHW" else np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
        *weights, y)
    np.testing.assert_array_equal(y, exact)
    with pytest.raises(pl.ScheduleError, match="a layout must be 'NCHW' or 'NHWC'"):
        ops.conv2d_int8(X, pl.placeholder(w_shape, "int8", name="W"), out_layout="NWHC")
