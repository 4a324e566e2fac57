# SPDX-License-Identifier: Apache-2.0
"""Calibration: the float graph run by polyloop on the user's batches, and the range of each
value a quantized layer reads or writes.

The graph is compiled once with the observed values as extra outputs. ``Method.MINMAX`` keeps
the smallest and largest value of each over all batches. ``Method.PERCENTILE`` runs the
batches a second time and counts each value's elements in a histogram of ``bins`` bins over
that min-max range (of ``|x|`` over ``[0, max |x|]`` for symmetric activations): the range
then ends at the bin edges that cut ``(100 - percentile) / 2`` % of the elements at each end
(``100 - percentile`` % above, symmetric), taken outwards.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

import numpy as np

from ...errors import ArgumentError, PolyloopError
from ..build import build
from ..executor import input_sizes
from ..ir import Graph, Value
from .options import Method, Options

# Calibration sets of at least this many batches show a progress bar (progress=None).
PROGRESS_FROM = 16


def _batch_arrays(g: Graph, batch: object, k: int) -> list[np.ndarray]:
    names = [v.name for v in g.inputs]
    if isinstance(batch, dict):
        unknown = sorted(set(batch) - set(names))
        missing = [n for n in names if n not in batch]
        if unknown or missing:
            raise ArgumentError(
                f"quantize: calibration batch {k} names {sorted(batch)}; the graph's inputs "
                f"are {names}" + (f" (unknown: {unknown})" if unknown else "") +
                (f" (missing: {missing})" if missing else ""))
        items = [batch[n] for n in names]
    elif isinstance(batch, (list, tuple)):
        items = list(batch)
    else:
        items = [batch]
    if len(items) != len(names):
        raise ArgumentError(f"quantize: calibration batch {k} holds {len(items)} array(s); "
                            f"the graph takes {len(names)} ({', '.join(names)}): give a "
                            "dict by input name, or the arrays in this order")
    arrays = []
    for v, a in zip(g.inputs, items):
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"quantize: calibration batch {k}, input '{v.name}': expected "
                                f"a NumPy array of {v.type}, got {type(a).__name__}")
        arrays.append(np.ascontiguousarray(a))
    return arrays


def calibration_batches(g: Graph, calibration: object) -> list[list[np.ndarray]]:
    """The calibration batches as lists of arrays in the order of ``g``'s inputs; an
    ``ArgumentError`` naming the batch and the input for a wrong name, count, dtype or shape.
    A batch is a dict by input name, a sequence of arrays in input order, or (a graph of one
    input) one array."""
    if isinstance(calibration, (np.ndarray, dict)) or not isinstance(calibration, Iterable):
        raise ArgumentError("quantize: calibration must be a list of batches (each a dict by "
                            "input name, a tuple of arrays, or one array), got "
                            f"{type(calibration).__name__}")
    batches = [_batch_arrays(g, b, k) for k, b in enumerate(calibration)]
    if not batches:
        raise ArgumentError("quantize: calibration is empty; give at least one batch of "
                            f"inputs ({', '.join(f'{v.name}: {v.type}' for v in g.inputs)}), "
                            "representative of the data the model will see")
    for k, arrays in enumerate(batches):
        try:
            input_sizes(g, arrays)
        except ArgumentError as e:
            raise ArgumentError(f"quantize: calibration batch {k}: {e}") from None
    return batches


class _Bar:
    """A tqdm progress bar over calibration runs, or nothing."""

    def __init__(self, total: int, show: bool | None) -> None:
        self.bar = None
        if show is False or (show is None and total < PROGRESS_FROM):
            return
        try:
            from tqdm import tqdm
        except ImportError:
            if show:
                raise PolyloopError("quantize(progress=True) needs tqdm: pip install "
                                    "'polyloop[tune]'") from None
            return
        self.bar = tqdm(total=total, unit="batch", desc="calibration", file=sys.stderr,
                        disable=None if show is None else False, dynamic_ncols=True)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _runs(ex, batches: list, observed: Sequence[Value], bar: _Bar):
    """Per batch, the observed values (float64 views are not made: float32 as computed)."""
    for arrays in batches:
        outs = ex(*arrays)
        outs = outs if isinstance(outs, tuple) else (outs,)
        yield dict(zip((v.name for v in observed), outs[-len(observed):]))
        bar.step()


def _percentile_range(counts: np.ndarray, lo: float, hi: float, cut: float,
                      two_sided: bool) -> tuple[float, float]:
    edges = np.linspace(lo, hi, counts.size + 1)
    cdf = np.cumsum(counts) / max(int(counts.sum()), 1)
    right = edges[min(int(np.searchsorted(cdf, 1.0 - cut)) + 1, counts.size)]
    if not two_sided:
        return -float(right), float(right)
    left = edges[int(np.searchsorted(cdf, cut, side="right"))]
    return float(left), float(right)


def observe(g: Graph, observed: Sequence[Value], batches: list, options: Options, *,
            progress: bool | None, fallback: str) -> dict[str, tuple[float, float]]:
    """``{value name: (lo, hi)}``: the calibrated range of each observed value (module
    docstring) over ``batches`` run through ``g`` compiled by polyloop."""
    ex = build(g.replace(outputs=(*g.outputs, *observed)), fallback=fallback)
    passes = 2 if options.method is Method.PERCENTILE else 1
    bar = _Bar(passes * len(batches), progress)
    try:
        lo = {v.name: np.inf for v in observed}
        hi = {v.name: -np.inf for v in observed}
        for values in _runs(ex, batches, observed, bar):
            for name, a in values.items():
                lo[name] = min(lo[name], float(a.min()))
                hi[name] = max(hi[name], float(a.max()))
        if options.method is Method.MINMAX:
            return {n: (lo[n], hi[n]) for n in lo}
        return _percentiles(ex, batches, observed, options, lo, hi, bar)
    finally:
        bar.close()


def _percentiles(ex, batches, observed, options: Options, lo: dict, hi: dict, bar: _Bar
                 ) -> dict[str, tuple[float, float]]:
    sym = options.symmetric_activations
    top = {n: max(-lo[n], hi[n]) for n in lo}
    counts = {n: np.zeros(options.bins, np.int64) for n in lo}
    for values in _runs(ex, batches, observed, bar):
        for name, a in values.items():
            span = (0.0, top[name]) if sym else (lo[name], hi[name])
            if span[1] > span[0]:
                counts[name] += np.histogram(np.abs(a) if sym else a, options.bins, span)[0]
    cut = (100.0 - options.percentile) / 100.0 / (1 if sym else 2)
    ranges = {}
    for n in lo:
        span = (0.0, top[n]) if sym else (lo[n], hi[n])
        if span[1] <= span[0]:
            ranges[n] = (lo[n], hi[n])
            continue
        a, b = _percentile_range(counts[n], *span, cut, not sym)
        ranges[n] = (max(a, lo[n]), min(b, hi[n]))
    return ranges
