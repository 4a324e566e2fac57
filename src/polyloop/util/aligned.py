# SPDX-License-Identifier: Apache-2.0
"""Byte buffers whose data starts on a chosen boundary (NumPy aligns large arrays to 16 bytes
only, so a 64-byte vector load from one may straddle two cache lines).

>>> buf = aligned_bytes(100, 64)
>>> buf.ctypes.data % 64, buf.nbytes
(0, 100)
"""
from __future__ import annotations

import numpy as np


def aligned_bytes(nbytes: int, align: int, *, zeros: bool = False) -> np.ndarray:
    """A uint8 array of ``nbytes`` bytes whose data starts on an ``align``-byte boundary
    (``zeros``: filled with zeros, else uninitialised).

    >>> aligned_bytes(3, 32, zeros=True).tolist()
    [0, 0, 0]
    """
    raw = (np.zeros if zeros else np.empty)(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes]
