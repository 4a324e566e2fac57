# SPDX-License-Identifier: Apache-2.0
"""ONNX operators written as compositions of the general graph operators: ReverseSequence
(a gather of computed positions), MaxUnpool (a scatter into zeros), Col2Im (a transposed
convolution with one-hot kernels) and DFT (products with constant cosine and sine
matrices)."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import BinaryFn, ScatterFn
from .convert_nn import matmul
from .convert_tensor import reshape, slice_axis
from .dims import normalize
from .node import Node


def _iota(n: Node, size: int, axis: int, rank: int) -> Value:
    """0, 1, ..., size-1 along ``axis`` of a rank-``rank`` tensor of 1s elsewhere."""
    shape = [1] * rank
    shape[axis] = size
    return n.const(np.arange(size, dtype="int64").reshape(shape))


def convert_reverse_sequence(n: Node) -> Value:
    x, lens = n.value(0), n.value(1)
    rank = len(x.type.shape)
    batch = normalize(int(n.attr("batch_axis", 1)), rank)
    time = normalize(int(n.attr("time_axis", 0)), rank)
    steps = x.type.shape[time]
    if not isinstance(steps, int) or batch == time:
        raise PolyloopError("ReverseSequence needs a constant time axis other than the batch "
                            "axis")
    shape = [1] * rank
    shape[batch] = x.type.shape[batch]
    length = reshape(n, n.emit(Op.CAST, lens, dtype="int64") if lens.type.dtype != "int64"
                     else lens, tuple(shape))
    t = _iota(n, steps, time, rank)
    back = n.emit(Op.BINARY, n.emit(Op.BINARY, length, n.const(np.array(1, "int64")),
                                    fn=BinaryFn.SUB), t, fn=BinaryFn.SUB)
    idx = n.emit(Op.WHERE, n.emit(Op.BINARY, t, length, fn=BinaryFn.LT), back, t)
    idx = n.emit(Op.BROADCAST_TO, idx, shape=x.type.shape)
    return n.emit(Op.GATHER_ELEMENTS, x, idx, axis=time)


def convert_max_unpool(n: Node) -> Value:
    x, idx = n.value(0), n.value(1)
    nd = len(x.type.shape) - 2
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    pads = [int(p) for p in n.attr("pads", [0] * (2 * nd))]
    out = tuple(n.ints(2, "the output shape")) if n.has(2) else None
    inferred = tuple(x.type.shape[:2]) + tuple(
        (s - 1) * st + k - pads[a] - pads[a + nd]
        for a, (s, st, k) in enumerate(zip(x.type.shape[2:], strides, kernel)))
    out = inferred if out is None else out
    if len(out) != len(inferred) or any(o < i for o, i in zip(out, inferred)):
        raise PolyloopError(f"output_shape {list(out)} is smaller than {list(inferred)}")
    total = int(np.prod(inferred))
    zeros = n.emit(Op.BROADCAST_TO, n.const(np.zeros((), x.type.dtype)), shape=(total,))
    flat_idx = reshape(n, idx, (int(np.prod(idx.type.shape)), 1))
    flat_x = reshape(n, x, (int(np.prod(x.type.shape)),))
    y = reshape(n, n.emit(Op.SCATTER_ND, zeros, flat_idx, flat_x, fn=ScatterFn.NONE), inferred)
    if out == inferred:
        return y
    # the unpooled block goes to the beginning of a larger output, zeros after it
    grow = tuple(o - i for o, i in zip(out, inferred))
    return n.emit(Op.PAD, y, pads=(0,) * len(out) + grow)


def convert_col2im(n: Node) -> Value:
    x = n.value(0)
    image = n.ints(1, "the image shape")
    block = n.ints(2, "the block shape")
    nd = len(image)
    dil = [int(d) for d in n.attr("dilations", [1] * nd)]
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    pads = [int(p) for p in n.attr("pads", [0] * (2 * nd))]
    batch, cb, length = x.type.shape
    b = int(np.prod(block))
    if not isinstance(cb, int) or cb % b:
        raise PolyloopError(f"{cb} columns do not divide by the block size {b}")
    grid = [(image[a] + pads[a] + pads[a + nd] - dil[a] * (block[a] - 1) - 1) // strides[a] + 1
            for a in range(nd)]
    if int(np.prod(grid)) != length:
        raise PolyloopError(f"{length} blocks do not match an image of {image} with block "
                            f"{block} (a grid of {grid})")
    channels = cb // b
    blocks = reshape(n, x, (batch, cb, *grid))
    eye = np.zeros((cb, 1, *block), x.type.dtype)
    for c in range(channels):
        for k in range(b):
            eye[(c * b + k, 0, *np.unravel_index(k, block))] = 1
    return n.emit(Op.CONV_TRANSPOSE, blocks, n.const(eye), strides=tuple(strides),
                  pads=tuple(pads), dilations=tuple(dil), groups=channels,
                  output_padding=tuple(int(i) - ((g - 1) * s + d * (k - 1) + 1 - p0 - p1)
                                       for i, g, s, d, k, p0, p1 in
                                       zip(image, grid, strides, dil, block, pads[:nd],
                                           pads[nd:])))


def convert_dft(n: Node) -> Value:
    """DFT of a real ([..., 1]) or complex ([..., 2]) signal along one axis: sums against
    constant cosine and sine matrices."""
    x = n.value(0)
    rank = len(x.type.shape)
    if n.opset < 20:
        axis = int(n.attr("axis", 1))
    else:
        axis = int(n.array(2, "the axis").reshape(-1)[0]) if n.has(2) else -2
    axis = normalize(axis, rank - 1) if axis >= 0 else normalize(axis, rank)
    inverse, onesided = n.flag("inverse", 0), n.flag("onesided", 0)
    size = x.type.shape[axis]
    length = int(n.array(1, "dft_length").reshape(-1)[0]) if n.has(1) else size
    if not isinstance(size, int) or x.type.shape[-1] not in (1, 2) or axis == rank - 1:
        raise PolyloopError("DFT needs a constant signal axis and a last axis of 1 (real) or 2 "
                            "(complex)")
    order = [a for a in range(rank) if a != axis] + [axis]
    moved = n.emit(Op.PERMUTE, x, axes=order)       # (..., 1 or 2, signal)
    if inverse and onesided:
        pass      # the spectrum's bins stay as given; dft_length is the signal's length
    elif length < size:
        moved = slice_axis(n, moved, rank - 1, 0, length)
    elif length > size:
        pads = [0] * (2 * rank)
        pads[2 * rank - 1] = length - size
        moved = n.emit(Op.PAD, moved, pads=tuple(pads))
    dtype = x.type.dtype
    moved = n.emit(Op.CAST, moved, dtype="float64")     # sums of many terms: in float64
    parts = [slice_axis(n, moved, rank - 2, c, 1) for c in range(x.type.shape[-1])]
    if inverse and onesided:
        out = _inverse_onesided(n, parts, length, n.has(1))
    else:
        out = _transform(n, parts, length, length // 2 + 1 if onesided else length, inverse)
    out = n.emit(Op.CAST, out, dtype=dtype)
    return n.emit(Op.PERMUTE, out, axes=[order.index(a) for a in range(rank)])


def _transform(n: Node, parts: list[Value], length: int, bins: int, inverse: bool) -> Value:
    """The (inverse) DFT at ``bins`` frequencies: real and imaginary parts, concatenated."""
    t, k = np.arange(length)[:, None], np.arange(bins)[None, :]
    angle = 2 * np.pi * t * k / length
    scale = 1 / length if inverse else 1.0
    cos = n.const(np.cos(angle) * scale)
    sin = n.const(np.sin(angle) * (scale if inverse else -1.0))
    real, imag = matmul(n, parts[0], cos), matmul(n, parts[0], sin)
    if len(parts) == 2:
        real = n.emit(Op.BINARY, real, matmul(n, parts[1], sin), fn=BinaryFn.SUB)
        imag = n.emit(Op.BINARY, imag, matmul(n, parts[1], cos), fn=BinaryFn.ADD)
    return n.emit(Op.CONCAT, real, imag, axis=len(real.type.shape) - 2)


def _inverse_onesided(n: Node, parts: list[Value], length: int, given: bool) -> Value:
    """The real signal of a one-sided (Hermitian) spectrum of ``bins`` frequencies."""
    bins = parts[0].type.shape[-1]
    size = length if given else 2 * (bins - 1)
    k, t = np.arange(bins)[:, None], np.arange(size)[None, :]
    weight = np.where((k == 0) | (2 * k == size), 1.0, 2.0) / size
    angle = 2 * np.pi * k * t / size
    real = matmul(n, parts[0], n.const(np.cos(angle) * weight))
    if len(parts) == 2:
        real = n.emit(Op.BINARY, real, matmul(n, parts[1], n.const(-np.sin(angle) * weight)),
                      fn=BinaryFn.ADD)
    return real


def convert_tensor_scatter(n: Node) -> Value:
    """The update written into the cache at each batch entry's write index along ``axis``
    (wrapping around the axis in circular mode): a scatter of computed positions."""
    cache, upd = n.value(0), n.value(1)
    rank = len(cache.type.shape)
    axis = normalize(int(n.attr("axis", -2)), rank)
    mode = n.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise PolyloopError(f"mode {mode!r} is not linear or circular")
    steps, length = upd.type.shape[axis], cache.type.shape[axis]
    if not isinstance(steps, int) or not isinstance(length, int) or axis == 0:
        raise PolyloopError("TensorScatter needs constant sequence axes after the batch axis")
    pos = _iota(n, steps, axis, rank)
    if n.has(2):
        start = reshape(n, n.value(2), (cache.type.shape[0],) + (1,) * (rank - 1))
        pos = n.emit(Op.BINARY, pos, n.emit(Op.CAST, start, dtype="int64")
                     if start.type.dtype != "int64" else start, fn=BinaryFn.ADD)
    if mode == "circular":
        pos = n.emit(Op.BINARY, pos, n.const(np.array(length, "int64")), fn=BinaryFn.MOD)
    pos = n.emit(Op.BROADCAST_TO, pos, shape=upd.type.shape)
    return n.emit(Op.SCATTER_ELEMENTS, cache, pos, upd, axis=axis)


def convert_stft(n: Node) -> Value:
    """Frames of the signal (a gather of constant positions), weighted by the window, each
    transformed like DFT along the frame."""
    x = n.value(0)
    batch, length, channels = x.type.shape
    step = int(n.array(1, "the frame step").reshape(-1)[0])
    window = n.value(2) if n.has(2) else None
    size = int(n.array(3, "the frame length").reshape(-1)[0]) if n.has(3) else \
        (window.type.shape[0] if window is not None else length)
    if window is None:
        window = n.const(np.ones(size, x.type.dtype))
    frames = 1 + (length - size) // step
    if frames < 1 or window.type.shape != (size,) or step < 1:
        raise PolyloopError(f"frames of {size} every {step} of a signal of {length}, with a "
                            f"window of shape {window.type.shape}")
    index = n.const((np.arange(frames)[:, None] * step + np.arange(size)[None, :])
                    .astype("int64"))
    framed = n.emit(Op.GATHER, x, index, axis=1)             # (batch, frames, size, C)
    framed = n.emit(Op.BINARY, framed, reshape(n, window, (1, 1, size, 1)), fn=BinaryFn.MUL)
    moved = n.emit(Op.CAST, n.emit(Op.PERMUTE, framed, axes=[0, 1, 3, 2]), dtype="float64")
    parts = [slice_axis(n, moved, 2, c, 1) for c in range(channels)]
    bins = size // 2 + 1 if n.flag("onesided", 1) else size
    out = n.emit(Op.CAST, _transform(n, parts, size, bins, False), dtype=x.type.dtype)
    return n.emit(Op.PERMUTE, out, axes=[0, 1, 3, 2])


CONVERTERS = {"STFT": convert_stft, "TensorScatter": convert_tensor_scatter,
              "ReverseSequence": convert_reverse_sequence, "MaxUnpool": convert_max_unpool,
              "Col2Im": convert_col2im, "DFT": convert_dft}
