# SPDX-License-Identifier: Apache-2.0
"""Scales and zero points from ranges, the way ONNX Runtime's quantization tool chooses them.

Activations (a range ``[lo, hi]`` seen in calibration): the range is widened to hold 0, made
symmetric about 0 when asked, and mapped onto the integer range of the dtype:
``scale = (hi - lo) / (qmax - qmin)`` (computed in float64, stored in float32),
``zero_point = round(qmin - lo / scale)`` (halves to even); a symmetric range has the zero
point in the middle (uint8: 128, int8: 0) and int8 then uses [-127, 127]. A range of width 0
gets scale 1 and zero point 0.

Weights: symmetric int8 in [-127, 127], zero point 0, ``scale = max |w| / 127`` over the whole
tensor or over each output channel, ``q = clip(round(w / scale))``. A bias becomes int32 at the
input scale times the weight scale, zero point 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclass(frozen=True, slots=True, eq=False)
class Quantization:
    """``real = scale * (q - zero_point)``: ``scale`` (float32) and ``zero_point`` (the
    integer dtype) hold one value, or one per channel along ``axis``.

    >>> q = activation_quantization(-1.0, 3.0, "uint8")
    >>> bool(q.scale[0] == np.float32(4 / 255)), int(q.zero_point[0])
    (True, 64)
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int = 0

    @property
    def dtype(self) -> str:
        return str(self.zero_point.dtype)

    def same(self, other: Quantization) -> bool:
        return self.dtype == other.dtype and np.array_equal(self.scale, other.scale) and \
            np.array_equal(self.zero_point, other.zero_point)

    def step(self) -> float:
        """The largest quantization step (the scale; per channel, the largest)."""
        return float(self.scale.max())


def activation_quantization(lo: float, hi: float, dtype: str,
                            symmetric: bool = False) -> Quantization:
    """The per-tensor quantization of an activation seen in ``[lo, hi]`` (module docstring)."""
    qmin, qmax = _RANGES[dtype]
    if symmetric and dtype == "int8":
        qmin = -127
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if symmetric:
        hi = max(-lo, hi)
        lo = -hi
    scale = (hi - lo) / (qmax - qmin)
    if np.float32(scale) < np.finfo(np.float32).tiny:
        return Quantization(np.ones(1, np.float32), np.zeros(1, dtype))
    zero = np.round((qmin + qmax) / 2.0) if symmetric else np.round(qmin - lo / scale)
    return Quantization(np.array([scale], np.float32),
                        np.array([min(max(zero, qmin), qmax)], dtype))


def weight_quantization(w: np.ndarray, axis: int | None) -> tuple[Quantization, np.ndarray]:
    """(the symmetric int8 quantization of ``w``, per channel along ``axis`` or per tensor
    when None; the int8 weights)."""
    w = np.asarray(w, np.float32)
    if axis is None:
        absmax = np.abs(w).max(initial=0.0).reshape(1).astype(np.float64)
        shape = (1,) * w.ndim
    else:
        others = tuple(k for k in range(w.ndim) if k != axis)
        absmax = np.abs(w).max(axis=others, initial=0.0).astype(np.float64)
        shape = tuple(-1 if k == axis else 1 for k in range(w.ndim))
    scale = (2 * absmax / 254).astype(np.float32)
    scale[scale < np.finfo(np.float32).tiny] = 1.0
    q = np.clip(np.round(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return Quantization(scale, np.zeros(scale.size, np.int8), axis or 0), q


def bias_quantization(b: np.ndarray, x: Quantization, w: Quantization
                      ) -> tuple[Quantization, np.ndarray]:
    """(the int32 quantization of bias ``b`` at ``x``'s scale times ``w``'s, the int32
    values: rounded halves to even, saturated)."""
    scale = (x.scale * w.scale).astype(np.float32)
    q = np.round(np.asarray(b, np.float64) / scale.astype(np.float64))
    info = np.iinfo(np.int32)
    q = np.clip(q, info.min, info.max).astype(np.int32)
    return Quantization(scale, np.zeros(scale.size, np.int32)), q
