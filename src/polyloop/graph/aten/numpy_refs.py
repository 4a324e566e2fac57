# SPDX-License-Identifier: Apache-2.0
"""NumPy references of ATen operators that have no lowering yet, for
``pl.graph.build(fallback="numpy")``: each takes the call's arguments by their schema names
(tensors as NumPy arrays) and returns what PyTorch returns, in the same order (ties of a sort
kept in input order, NaN the largest value, as PyTorch does). An operator without an entry
here runs only through ``fallback="torch"``: PyTorch defines the ATen operators, and a second
implementation is written only where NumPy has the same operation.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _stable_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Indices that sort ``x`` along ``axis``, ties in input order, NaN above every number."""
    moved = np.moveaxis(x, axis, -1)
    nan = np.isnan(moved) if np.issubdtype(moved.dtype, np.floating) else \
        np.zeros(moved.shape, bool)
    key = np.where(nan, 0, moved)
    if descending:      # NaN first, then larger values; lexsort sorts by its last key first
        order = np.lexsort((-key if key.dtype != np.bool_ else ~key, ~nan))
    else:
        order = np.lexsort((key, nan))
    return np.moveaxis(order, -1, axis)


def sort(self, dim: int = -1, descending: bool = False, stable: bool | None = None):
    order = _stable_order(self, dim, descending)
    return np.take_along_axis(self, order, dim), order.astype(np.int64)


def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    order = np.take(_stable_order(self, dim, largest), np.arange(k), axis=dim)
    return np.take_along_axis(self, order, dim), order.astype(np.int64)


def flip(self, dims):
    return np.flip(self, tuple(dims))


def roll(self, shifts, dims=()):
    if not dims:
        return np.roll(self.reshape(-1), tuple(shifts)).reshape(self.shape)
    return np.roll(self, tuple(shifts), tuple(dims))


def cumprod(self, dim: int, dtype=None):
    return np.cumprod(self, axis=dim)


def i0(self):
    return np.i0(self)


NUMPY_REFERENCES: dict[str, Callable[..., object]] = {
    "sort": sort, "topk": topk, "flip": flip, "roll": roll, "cumprod": cumprod, "i0": i0}
