# SPDX-License-Identifier: Apache-2.0
"""One model of the zoo through one route, checked against PyTorch eager.

``run(model, route)`` imports the model (``route="torch"``: ``pl.graph.from_torch``;
``"onnx"``: ``torch.onnx.export(dynamo=False, opset_version=17)`` then
``pl.graph.from_onnx``), builds it with no fallback, runs it on fresh inputs with every output
element poisoned first, and compares with the model's own answer: the maximum error relative
to the output's scale (its largest magnitude). ``Outcome`` records each stage's time, so the
benchmark can add columns.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass, field

import numpy as np
import torch

import polyloop as pl

from .models import ZooModel

TOLERANCE = 1e-3
SPREAD = 1e-2     # the least difference between two samples' outputs, of the output's scale


@dataclass
class Outcome:
    """What happened to one model on one route: the stage it reached (``imported``,
    ``built``, ``matches``), the error if one stopped it, the relative error, seconds per
    stage."""

    model: str
    route: str
    stage: str = "started"
    error: str = ""
    rel_error: float | None = None
    seconds: dict = field(default_factory=dict)
    executor: object = None
    onnx_model: bytes | None = None     # the exported model (the ONNX route)
    module: object = None               # the PyTorch module compared with

    @property
    def ok(self) -> bool:
        return self.stage == "matches"


def import_graph(zm: ZooModel, model: torch.nn.Module, route: str, example: tuple,
                 dynamic: bool):
    """The model's graph through ``route``, and the exported ONNX model (None for the torch
    route)."""
    if route == "torch":
        return pl.graph.from_torch(model, example, dynamic=zm.dynamic if dynamic else None), \
            None
    buf = io.BytesIO()
    axes = {name: {d: n for d, n in dims.items()} for name, dims in zm.dynamic.items()} \
        if dynamic else None
    # gradients stay on: with them off nn.MultiheadAttention takes its fused fast path,
    # which the TorchScript exporter cannot export (ViT-B/16)
    torch.onnx.export(model, example, buf, dynamo=False, opset_version=17,
                      input_names=list(zm.input_names), output_names=["out"],
                      dynamic_axes=axes)
    import onnx
    return pl.graph.from_onnx(onnx.load_from_string(buf.getvalue())), buf.getvalue()


def poisoned_run(ex, arrays: list[np.ndarray]) -> np.ndarray:
    """The first output, computed into NaN-filled arrays (every element must be written)."""
    sizes: dict = {}
    for v, a in zip(ex.graph.inputs, arrays):
        sizes.update({d: n for d, n in zip(v.type.shape, a.shape) if isinstance(d, str)})
    for rule in ex.graph.size_rules:
        if rule.terms:
            sizes[rule.name] = rule.value(sizes)
    outs = tuple(np.full(v.type.concrete(sizes), np.nan, v.type.dtype) for v in ex.graph.outputs)
    ex(*arrays, out=outs)
    return outs[0]


def _check_reference(want: np.ndarray) -> None:
    """AssertionError when the reference output hardly depends on the input (a comparison
    that could not see a wrong value): its first two samples differ by less than ``SPREAD``
    of its scale."""
    if want.shape[0] < 2:
        return
    scale = max(float(np.abs(want).max()), 1e-30)
    spread = float(np.abs(want[0].astype(np.float64) - want[1]).max()) / scale
    if spread < SPREAD:
        raise AssertionError(f"PyTorch's output hardly depends on the input (two samples "
                             f"differ by {spread:.1e} of its scale): give the model weights "
                             "whose output does")


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape}, PyTorch {want.shape}")
    if not np.isfinite(got).all():
        raise AssertionError("an output element was not written (or is not finite)")
    scale = max(float(np.abs(want).max()), 1e-12)
    return float(np.abs(got.astype(np.float64) - want).max()) / scale


def run(zm: ZooModel, route: str, *, batches: tuple[int, ...] = (2,), dynamic: bool = False,
        build_kwargs: dict | None = None) -> Outcome:
    """Import, build and check ``zm`` through ``route``; each later batch is a second call of
    the same build (with ``dynamic``, the sizes vary)."""
    out = Outcome(zm.name, route)
    out.module = model = zm.make(route)
    inputs_of = zm.onnx_inputs if route == "onnx" and zm.onnx_inputs else zm.inputs
    stage_start = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal stage_start
        now = time.perf_counter()
        out.seconds[stage] = now - stage_start
        out.stage, stage_start = stage, now
    try:
        g, out.onnx_model = import_graph(zm, model, route, inputs_of(batches[0]), dynamic)
        lap("imported")
        out.executor = ex = pl.graph.build(g, **(build_kwargs or {}))
        lap("built")
        worst = 0.0
        for batch in batches:
            torch.manual_seed(batch)
            inputs = inputs_of(batch)
            with torch.no_grad():
                want = model(*inputs).numpy()
            _check_reference(want)
            got = poisoned_run(ex, [t.numpy() for t in inputs])
            worst = max(worst, relative_error(got, want))
        out.rel_error = worst
        if worst > TOLERANCE:
            raise AssertionError(f"max error {worst:.2e} of the output's scale (> {TOLERANCE})")
        lap("matches")
    except Exception as e:  # the report says which stage failed and why
        out.error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
    return out
