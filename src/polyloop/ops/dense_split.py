# SPDX-License-Identifier: Apache-2.0
"""A dense layer on a few rows with large weights, its reduction split between the threads.

``y = x @ w (+ b), optionally ReLU`` with ``x (M, K)`` of a few rows and ``w (K, N)`` stored
contiguous along N reads every weight once and does two FLOPs with it: its speed is the speed
at which the weights stream in. Splitting the columns between threads leaves them unequal
(100 columns are 7 vectors: 4 + 3) and each thread reads a strided panel of every row;
splitting the reduction gives each thread an equal, contiguous half of the weights.

``dense_split_k(x, w, b, splits=S)`` is that: ``<name>_part[t, i, j]`` sums the ``t``-th of
``S`` equal slices of the reduction over rows widened to whole vectors (the weight loads of the
extra columns are masked off, reading zeros), then ``name[i, j] = sum_t part[t, i, j] + b[j]``
(ReLU'd with ``relu=True``). ``schedule_dense_split_k`` runs the slices in parallel, each one
accumulating all its ``M x N`` partial sums in registers.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import dense_split_k, schedule_dense_split_k
>>> x = pl.placeholder((2, 64), name="x"); w = pl.placeholder((64, 20), name="w")
>>> mod = pl.build(schedule_dense_split_k(dense_split_k(x, w, splits=2)))
>>> float(mod(np.ones((2, 64), "float32"), np.ones((64, 20), "float32"))[1, 19])
64.0
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import maximum, where
from ..ir.expr import Const
from ..schedule import Schedule
from .knobs import check_knobs, default_lanes

#: most vector accumulators of one slice's register tile (rows x column vectors)
MAX_ACCUMULATORS = 28


def _sizes(who: str, x: Tensor, w: Tensor, columns: int | None) -> tuple[int, int, int, int]:
    """(rows M, reduction K, columns N, stored columns) of ``x`` (M, K) and ``w``: (K, N), or
    one panel ``pack_matmul_weight`` made, (1, K, nr) with ``columns = N <= nr``."""
    packed = isinstance(w, Tensor) and w.ndim == 3
    if not isinstance(x, Tensor) or not isinstance(w, Tensor) or x.ndim != 2 \
            or w.ndim != (3 if packed else 2):
        raise ScheduleError(f"{who}: x must be (M, K) and w (K, N) or one packed panel "
                            f"(1, K, nr), got {x!r} and {w!r}")
    dims = (*x.shape, *w.shape)
    if not all(isinstance(d, Const) for d in dims) or str(x.shape[1]) != str(w.shape[-2]) \
            or (packed and str(w.shape[0]) != "1"):
        raise ScheduleError(f"{who}: x {x.shape} and w {w.shape} must be constant sizes with "
                            "x's columns equal to w's rows (one panel when packed)")
    stored = w.shape[-1].value                                   # type: ignore[union-attr]
    if packed and (columns is None or not 1 <= columns <= stored):
        raise ScheduleError(f"{who}: packed weights of {stored} columns need columns= the "
                            f"result's columns, at most {stored}, got {columns!r}")
    cols = columns if packed else stored
    return x.shape[0].value, x.shape[1].value, cols, stored     # type: ignore[union-attr]


def dense_split_k(x: Tensor, w: Tensor, bias: Tensor | None = None, *, splits: int = 2,
                  relu: bool = False, lanes: int | None = None, name: str = "dense",
                  columns: int | None = None) -> Tensor:
    """``x @ w + bias`` (ReLU'd when ``relu``) as ``splits`` partial products over equal slices
    of the reduction and their sum (see the module docstring). ``splits`` must divide K.
    ``w`` is (K, N), or its one panel ``pack_matmul_weight(w, nr)`` (1, K, nr) with ``columns
    = N``: with ``nr`` whole vectors of zeros past N, the weights are read without masks.

    >>> import polyloop as pl
    >>> dense_split_k(pl.placeholder((4, 5408), name="x"), pl.placeholder((5408, 100), name="w"))
    Tensor(dense: float32[4, 100])
    >>> dense_split_k(pl.placeholder((4, 5408), name="x"),
    ...               pl.placeholder((1, 5408, 112), name="p"), columns=100)
    Tensor(dense: float32[4, 100])
    """
    who = "dense_split_k"
    rows, depth, cols, stored = _sizes(who, x, w, columns)
    lanes = default_lanes(str(x.dtype)) if lanes is None else lanes
    check_knobs(who, splits=splits, lanes=lanes)
    if depth % splits:
        raise ScheduleError(f"{who}: {splits} slices do not divide the reduction of {depth}; "
                            "pick a divisor")
    if bias is not None and (bias.ndim != 1 or str(bias.shape[0]) != str(cols)):
        raise ScheduleError(f"{who}: bias must be ({cols},), got {bias!r}")
    step = depth // splits
    wide = -(-cols // lanes) * lanes
    k = te.reduce_axis((0, step), name="rk")

    def at(t, j):
        return w[0, t * step + k, j] if w.ndim == 3 else w[t * step + k, j]

    def weight(t, j):
        # columns past the stored ones (when N is not whole vectors): masked loads, zeros
        return at(t, j) if wide <= stored else where(j < cols, at(t, j), 0.0)
    part = te.compute((splits, rows, wide),
                      lambda t, i, j: te.sum(x[i, t * step + k] * weight(t, j), axis=k),
                      name=f"{name}_part")

    def total(i, j):
        s = part[0, i, j]
        for t in range(1, splits):
            s = s + part[t, i, j]
        s = s + bias[j] if bias is not None else s
        return maximum(s, 0.0) if relu else s
    return te.compute((rows, cols), total, name=name)


def schedule_dense_split_k(out: Tensor, *, lanes: int | None = None,
                           parallel: bool = True) -> Schedule:
    """The slices of ``out = dense_split_k(...)`` in parallel (one slice: its tiles of rows),
    each tile of rows by all the (widened) columns accumulated in registers (at most
    ``MAX_ACCUMULATORS`` vectors), then the slices' sum.

    >>> import polyloop as pl
    >>> x = pl.placeholder((3, 40), name="x"); w = pl.placeholder((40, 20), name="w")
    >>> sch = schedule_dense_split_k(dense_split_k(x, w, lanes=8), lanes=8)
    >>> [loop.name for loop in sch.get_loops("dense_part")]
    ['t', 'i_0', 'rk', 'i_1', 'j_0', 'j_1']
    """
    who = "schedule_dense_split_k"
    part = next((t for t in getattr(out, "inputs", ()) if t.name == f"{out.name}_part"), None)
    if part is None:
        raise ScheduleError(f"{who}: expected the result of dense_split_k, got {out!r}")
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    check_knobs(who, lanes=lanes)
    splits, rows, wide = (d.value for d in part.shape)      # type: ignore[union-attr]
    if wide % lanes or wide // lanes > MAX_ACCUMULATORS:
        raise ScheduleError(f"{who}: rows of {wide} columns are not whole vectors of {lanes} "
                            f"or more than {MAX_ACCUMULATORS} vectors; use schedule_matmul")
    sch = Schedule(out)
    tile = sch.cache_write(part.name, "local")
    t, i, j, k = sch.get_loops(part.name)
    i0, i1 = sch.split(i, factors=[None, min(rows, MAX_ACCUMULATORS // (wide // lanes), 8)])
    j0, j1 = sch.split(j, factors=[None, lanes])
    sch.reorder(t, i0, k, i1, j0, j1)
    if parallel:
        sch.parallel(t if splits > 1 else i0)
    sch.unroll(i1)
    sch.unroll(j0)
    sch.vectorize(j1)
    sch.decompose_reduction(part.name, k)
    sch.reverse_compute_at(tile, i0)
    return sch
