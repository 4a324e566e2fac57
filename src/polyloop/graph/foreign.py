# SPDX-License-Identifier: Apache-2.0
"""Foreign operators: calls an importer could not map onto the graph IR, kept in the graph as
typed nodes (``Op.FOREIGN``) so that ``build(fallback=...)`` can run them through a reference
implementation (PyTorch, NumPy) instead of refusing the model.

An importer emits one with ``GraphBuilder.emit_foreign(Reference(...), inputs, out_types)``;
the ``Reference`` names the operator, says why it has no lowering and where the model uses it,
and carries one Python function per fallback kind (``"torch"``, ``"numpy"``) that computes the
results from NumPy arrays.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import PolyloopError
from .ir import Call, ExternCall, Graph, Op

FALLBACKS = ("error", "torch", "numpy")


@dataclass(frozen=True, slots=True, eq=False)
class Reference:
    """A foreign operator: ``op`` (``"aten.sort.stable"``, ``"onnx.TopK"``), its static
    arguments as text (``signature``), why the graph has no lowering for it (``reason``),
    where the model uses it (``where``), and its implementations by fallback kind
    (``fn(*arrays) -> array or tuple of arrays``). Equal and hashed by its text, so a graph's
    text (and the build cache key) says everything that matters."""

    op: str
    signature: str
    reason: str
    where: str = ""
    impls: dict[str, Callable[..., object]] = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        return self.signature

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reference) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(self.signature)

    def describe(self) -> str:
        return f"{self.op}: {self.reason} ({self.where or 'top level'})"


def foreign_calls(g: Graph) -> list[Call]:
    return [b for b in g.bindings if isinstance(b, Call) and b.op is Op.FOREIGN]


def unsupported_error(kind: str, items: list[tuple[str, str, str]]) -> PolyloopError:
    """The error that lists every unsupported call of a model at once: ``items`` are
    (value name, operator, where and why)."""
    lines = [f"  {name}: {op} ({where})" for name, op, where in items]
    return PolyloopError(f"the {kind} model uses {len(items)} unsupported operator call(s):\n"
                         + "\n".join(lines) + "\nreplace them in the model, build with "
                         "fallback='torch' or 'numpy' to run them through a reference "
                         "implementation, or route them to Python with "
                         "pl.graph.register_extern('env.<op>', fn) where an operator of the "
                         "graph IR matches")


def _reference(c: Call | ExternCall) -> Reference:
    return dict(c.attrs)["reference"]


def apply_fallback(g: Graph, fallback: str) -> Graph:
    """``g`` with every foreign call routed to its ``fallback`` implementation (an extern call
    named ``fallback.<kind>``); with ``"error"``, or when one has no such implementation, a
    ``PolyloopError`` lists every one at once. Prints the routed calls.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2,))
    >>> g = b.build(b.emit(pl.graph.Op.RELU, x))
    >>> apply_fallback(g, "error") is g
    True
    """
    if fallback not in FALLBACKS:
        raise PolyloopError(f"pl.graph.build(fallback={fallback!r}): use one of "
                            f"{', '.join(map(repr, FALLBACKS))}")
    calls = foreign_calls(g)
    if not calls:
        return g
    missing = [c for c in calls if fallback not in _reference(c).impls]
    if missing:
        items = [(c.outputs[0].name, _reference(c).op,
                  f"{_reference(c).where}; {_reference(c).reason}"
                  + ("" if fallback == "error" else
                     f"; no {fallback} reference: try fallback="
                     f"{next(iter(_reference(c).impls), 'none')!r}"))
                 for c in missing]
        raise unsupported_error("imported", items)
    routed = set(map(id, calls))
    bindings = tuple(ExternCall(b.outputs, f"fallback.{fallback}", b.inputs, b.attrs)
                     if id(b) in routed else b for b in g.bindings)
    print(f"polyloop: {len(calls)} operator call(s) run through the {fallback} fallback: "
          + ", ".join(f"%{c.outputs[0].name} = {_reference(c).op}" for c in calls),
          file=sys.stderr)
    return g.replace(bindings=bindings)


def fallback_function(call: ExternCall) -> Callable[..., object] | None:
    """The Python function of a fallback extern call (None for a registered extern)."""
    if not call.name.startswith("fallback."):
        return None
    impl = _reference(call).impls[call.name.partition(".")[2]]
    types = [v.type for v in call.outputs]

    def run(*arrays: np.ndarray, **_attrs: object) -> tuple[np.ndarray, ...]:
        result = impl(*arrays)
        results = result if isinstance(result, (tuple, list)) else (result,)
        return tuple(np.asarray(r, dtype=t.dtype) for r, t in zip(results, types))
    return run
