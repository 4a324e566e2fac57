# SPDX-License-Identifier: Apache-2.0
"""Indices a model reads from its inputs (embedding rows, gather and scatter positions),
checked before each run: an index outside its axis is the caller's mistake, refused with
the input named, never a read outside an array (computed indices are clamped by the
kernels themselves)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError
from .ir import Graph, Op


@dataclass(frozen=True, slots=True)
class IndexCheck:
    """Input ``name`` holds indices into axes of these sizes (the last index axis walks
    ``sizes`` when there are several, as GATHER_ND's); negative ones count from the end
    when ``negative``."""

    name: str
    sizes: tuple[int, ...]
    negative: bool
    what: str

    def check(self, a: np.ndarray) -> None:
        if not a.size:
            return
        cols = a.reshape(-1, len(self.sizes)) if len(self.sizes) > 1 else a.reshape(-1, 1)
        for k, size in enumerate(self.sizes):
            col = cols[:, k]
            low = -size if self.negative else 0
            if col.min() < low or col.max() >= size:
                raise ArgumentError(f"input '{self.name}': {self.what} indices must be in "
                                    f"[{low}, {size}), got [{col.min()}, {col.max()}]")


def _axis_size(call, axis_key: str = "axis") -> int | None:
    x = call.inputs[0].type
    d = x.shape[call.attr(axis_key, 0) % len(x.shape)]
    return d if isinstance(d, int) else None


def index_checks(g: Graph) -> list[IndexCheck]:
    """The checks of ``g``'s graph inputs that kernels read as indices."""
    inputs = {v.name for v in g.inputs}
    calls = [c for b in g.bindings for c in getattr(getattr(b, "kernel", None), "body", ())]
    out = []
    for c in calls:
        if c.op is Op.EMBEDDING:
            idx, sizes, neg = c.inputs[1], (c.inputs[0].type.shape[0],), False
        elif c.op in (Op.GATHER, Op.GATHER_ELEMENTS, Op.SCATTER_ELEMENTS):
            idx, sizes, neg = c.inputs[1], (_axis_size(c),), True
        elif c.op in (Op.GATHER_ND, Op.SCATTER_ND):
            k = c.inputs[1].type.shape[-1]
            b = c.attr("batch_dims", 0)
            idx, neg = c.inputs[1], True
            sizes = tuple(c.inputs[0].type.shape[b:b + k]) if isinstance(k, int) else (None,)
        else:
            continue
        if idx.name in inputs and all(isinstance(s, int) for s in sizes):
            out.append(IndexCheck(idx.name, sizes, neg, str(c.op)))
    return out
