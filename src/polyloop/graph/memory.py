# SPDX-License-Identifier: Apache-2.0
"""Memory planning: where every value of a fused graph lives when the model runs.

Inputs and outputs live in the caller's arrays, constants in the library's weight blob, and
every intermediate value in a slot of one workspace. A slot is reused by a later value once all
the values it held are dead (views share their source's storage, so they extend its life).
Sizes may depend on size parameters: a slot's size is the largest of its values' sizes, so
the offsets are computed when the sizes are known (in C, by the generated entry).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .ir import VIEWS, Call, Graph, Value


class Where(enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    CONST = "const"
    WORK = "work"


@dataclass(frozen=True, slots=True)
class Storage:
    """Where a value's elements are: argument/constant/slot ``index``."""

    where: Where
    index: int


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Storage of every value, and the values each workspace slot holds over time."""

    storage: dict[str, Storage]
    slots: tuple[tuple[Value, ...], ...]

    def describe(self) -> str:
        lines = [f"slot {k}: {', '.join(f'%{v.name} {v.type}' for v in vs)}"
                 for k, vs in enumerate(self.slots)]
        return "\n".join(lines) or "no workspace"


def nbytes(v: Value, sizes: dict[str, int]) -> int:
    return int(np.prod(v.type.concrete(sizes), dtype=np.int64)) * np.dtype(v.type.dtype).itemsize


def _last_uses(g: Graph, root: dict[str, str]) -> dict[str, int]:
    last: dict[str, int] = {}
    for step, b in enumerate(g.bindings):
        for v in (*b.inputs, *b.outputs):
            last[root[v.name]] = step
    return last


def plan_memory(g: Graph) -> MemoryPlan:
    """Assign storage to every value of ``g`` (bindings in order; graph outputs materialised).

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); Op = pl.graph.Op; x = b.input("x", (8,))
    >>> y = b.emit(Op.EXP, b.emit(Op.EXP, b.emit(Op.EXP, x)))
    >>> print(plan_memory(b.build(b.emit(Op.EXP, y))).describe())
    slot 0: %exp float32[8], %exp_2 float32[8]
    slot 1: %exp_1 float32[8]
    """
    storage: dict[str, Storage] = {}
    for k, v in enumerate(g.inputs):
        storage[v.name] = Storage(Where.INPUT, k)
    for k, c in enumerate(g.constants):
        storage[c.value.name] = Storage(Where.CONST, k)
    for k, v in enumerate(g.outputs):
        storage[v.name] = Storage(Where.OUTPUT, k)
    root = {name: name for name in storage}
    for b in g.bindings:
        for v in b.outputs:
            root.setdefault(v.name, v.name)
        if isinstance(b, Call) and b.op in VIEWS:
            root[b.outputs[0].name] = root[b.inputs[0].name]
    last = _last_uses(g, root)
    slots: list[list[Value]] = []
    free: list[int] = []
    sample = {p: 1 for p in g.params}
    for step, b in enumerate(g.bindings):
        for v in b.outputs:
            if root[v.name] != v.name or v.name in storage:
                continue
            size = nbytes(v, sample)
            best = min(free, key=lambda s: abs(nbytes(slots[s][0], sample) - size), default=None)
            if best is None:
                slots.append([])
                best = len(slots) - 1
            else:
                free.remove(best)
            slots[best].append(v)
            storage[v.name] = Storage(Where.WORK, best)
        for s, values in enumerate(slots):
            if s not in free and last[values[-1].name] == step:
                free.append(s)
    for name, r in root.items():
        storage[name] = storage[r]
    return MemoryPlan(storage, tuple(tuple(vs) for vs in slots))
