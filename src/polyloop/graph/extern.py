# SPDX-License-Identifier: Apache-2.0
"""Extern functions: operators routed to Python (NumPy, PyTorch...) instead of generated code."""
from __future__ import annotations

from collections.abc import Callable

from ..errors import PolyloopError
from .ir import Call, ExternCall, Graph, Op

_REGISTRY: dict[str, Callable[..., object]] = {}


def register_extern(name: str, fn: Callable[..., object] | None) -> None:
    """Route operator ``op`` to ``fn`` when ``name`` is ``"env.<op>"`` (``fn(*arrays, **attrs)``
    returns the result array); ``fn=None`` removes the route.

    >>> import numpy as np, polyloop as pl
    >>> pl.graph.register_extern("env.relu", lambda x: np.maximum(x, 0))
    >>> pl.graph.register_extern("env.relu", None)
    """
    op = name.partition(".")[2]
    if not name.startswith("env.") or op not in {o.value for o in Op}:
        raise PolyloopError(f"register_extern({name!r}): the name is 'env.<operator>' with an "
                            f"operator of the graph IR: {', '.join(o.value for o in Op)}")
    if fn is None:
        _REGISTRY.pop(name, None)
    elif not callable(fn):
        raise PolyloopError(f"register_extern({name!r}): {fn!r} is not callable")
    else:
        _REGISTRY[name] = fn


def lookup_extern(name: str) -> Callable[..., object]:
    if name not in _REGISTRY:
        raise PolyloopError(f"no extern function is registered as {name!r}; register one with "
                            "pl.graph.register_extern(name, fn)")
    return _REGISTRY[name]


def route_externs(g: Graph) -> Graph:
    """Replace each call of an operator with a registered extern by an ``ExternCall``."""
    bindings = []
    for b in g.bindings:
        if isinstance(b, Call) and f"env.{b.op}" in _REGISTRY:
            b = ExternCall(b.outputs, f"env.{b.op}", b.inputs, b.attrs)
        bindings.append(b)
    return g.replace(bindings=tuple(bindings))
