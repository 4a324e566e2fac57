# SPDX-License-Identifier: Apache-2.0
"""Handles to blocks and loops, and the replayable trace of schedule primitives."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import ParseError
from .index_map import parse_index_map

# The schedule methods a trace may call when it is replayed (a trace read from a file names
# its primitives as text: nothing outside this list is looked up).
REPLAYABLE = frozenset("""
    annotate bind cache_read cache_write compute_at compute_inline decompose_reduction
    distribute double_buffer storage_align fuse get_block get_consumers get_loops get_producers merge parallel prefetch
    reorder reverse reverse_compute_at reverse_compute_inline rfactor shift skew split
    tensorize tile transform_layout unroll vectorize compute_root sample_categorical
    sample_compute_location sample_perfect_tile""".split())


@dataclass(frozen=True, slots=True)
class BlockHandle:
    """A block: the statements one tensor (or kernel instruction) lowers to.

    >>> import polyloop as pl
    >>> A = pl.placeholder((10,), "float32", name="A")
    >>> B = pl.compute((10,), lambda i: A[i] * 2.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> blk = sch.get_block("B")
    >>> blk, blk.name, sch.get_loops(blk)
    (Block('B'), 'B', [Loop('i', #0)])
    """
    name: str

    def __repr__(self) -> str:
        return f"Block({self.name!r})"


@dataclass(frozen=True, slots=True)
class LoopHandle:
    """A loop of the schedule; it stays valid until a primitive replaces the loop.

    >>> import polyloop as pl
    >>> A = pl.placeholder((10,), "float32", name="A")
    >>> B = pl.compute((10,), lambda i: A[i] * 2.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> (i,) = sch.get_loops("B")
    >>> outer, inner = sch.split(i, factors=[None, 4])
    >>> i, outer, inner
    (Loop('i', #0), Loop('i_0', #1), Loop('i_1', #2))
    >>> print(sch)
    for i_0 in range(3):
        for i_1 in range(min(4, -(4 * i_0) + 10)):
            B[4 * i_0 + i_1] = A[4 * i_0 + i_1] * 2.0
    """
    id: int
    name: str

    def __repr__(self) -> str:
        return f"Loop({self.name!r}, #{self.id})"


@dataclass(frozen=True, slots=True)
class Step:
    primitive: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    results: tuple[Any, ...]


class SampledInt(int):
    """An int drawn by a sampling primitive: it remembers the trace step and the position in
    that step's decision, so a trace replayed with another decision passes the new value on."""
    step: int
    position: int

    @staticmethod
    def make(value: int, step: int, position: int) -> SampledInt:
        v = SampledInt(value)
        v.step, v.position = step, position
        return v


class SampledStr(str):
    """A string drawn by ``sample_categorical`` (see ``SampledInt``)."""
    step: int
    position: int

    @staticmethod
    def make(value: str, step: int, position: int) -> SampledStr:
        v = SampledStr(value)
        v.step, v.position = step, position
        return v


def encode(v: Any) -> Any:
    if isinstance(v, (SampledInt, SampledStr)):
        plain = int(v) if isinstance(v, int) else str(v)
        return {"sample": v.step, "at": v.position, "value": plain}
    if isinstance(v, LoopHandle):
        return {"loop": v.id, "name": v.name}
    if isinstance(v, BlockHandle):
        return {"block": v.name}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    return v


def decode(v: Any) -> Any:
    if isinstance(v, dict) and "loop" in v:
        return LoopHandle(v["loop"], v["name"])
    if isinstance(v, dict) and "block" in v:
        return BlockHandle(v["block"])
    if isinstance(v, dict) and "sample" in v:
        return v["value"]
    if isinstance(v, dict) and "intrin" in v:
        return v["intrin"]  # tensorize looks the intrinsic up by name
    if isinstance(v, dict) and "lambda" in v:
        # index maps are recorded as their printed form: read back against a whitelist
        return parse_index_map(v["lambda"])
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


def _step(k: int, d: Any) -> Step:
    """Step ``k`` of a trace read from JSON, checked for shape and for a known primitive."""
    fields = {"primitive": str, "args": list, "kwargs": dict, "results": list}
    if not isinstance(d, dict) or any(not isinstance(d.get(f), t) for f, t in fields.items()):
        raise ParseError(f"step {k} of the trace is not {{'primitive': str, 'args': list, "
                         f"'kwargs': dict, 'results': list}}: {str(d)[:120]}")
    if d["primitive"] not in REPLAYABLE:
        raise ParseError(f"step {k} of the trace calls {d['primitive'][:60]!r}, which is not a "
                         f"schedule primitive; primitives: {', '.join(sorted(REPLAYABLE))}")
    if not all(isinstance(key, str) and key.isidentifier() for key in d["kwargs"]):
        raise ParseError(f"step {k} of the trace has a keyword that is not a name: "
                         f"{list(d['kwargs'])[:5]}")
    return Step(d["primitive"], tuple(d["args"]), tuple(d["kwargs"].items()),
                tuple(d["results"]))


def _py(v: Any) -> str:
    if isinstance(v, dict) and "sample" in v:
        return f"v{v['sample']}_{v['at']}"
    if isinstance(v, dict) and "loop" in v:
        return f"l{v['loop']}"
    if isinstance(v, dict) and "block" in v:
        return f"sch.get_block({v['block']!r})"
    if isinstance(v, list):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    if isinstance(v, dict) and "lambda" in v:
        return v["lambda"]
    if isinstance(v, dict) and "intrin" in v:
        return repr(v["intrin"])
    return repr(v)


def _target(v: Any) -> str:
    """A result as an assignment target: loops are ``l<id>``, blocks ``b_<name>`` (the steps
    that use a block look it up by name again, so the variable is only for the reader), drawn
    values ``v<step>_<position>``; a result that is no variable (the ``None`` factor a tile
    sample returns for a symbolic extent) is ``_``."""
    if isinstance(v, dict) and "block" in v:
        return "b_" + re.sub(r"\W", "_", v["block"])
    if isinstance(v, dict) and ("sample" in v or "loop" in v):
        return _py(v)
    return "_"


# primitives that return a list of handles (the others return one handle or none)
_LIST_RESULTS = frozenset({"get_loops", "split", "tile", "distribute", "sample_perfect_tile"})


class Trace:
    """The primitives applied to a schedule, in order. ``str(trace)`` is Python that replays them;
    ``to_json``/``from_json`` round-trip it.

    >>> import polyloop as pl
    >>> A = pl.placeholder((10,), "float32", name="A")
    >>> B = pl.compute((10,), lambda i: A[i] * 2.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> outer, inner = sch.split(sch.get_loops("B")[0], factors=[None, 4])
    >>> print(sch.trace)
    [l0] = sch.get_loops(sch.get_block('B'))
    l1, l2 = sch.split(l0, factors=[None, 4])
    >>> again = pl.Schedule.from_trace(B.to_program(), pl.Trace.from_json(sch.trace.to_json()))
    >>> str(again) == str(sch), len(again.trace)
    (True, 2)
    """

    def __init__(self, steps: tuple[Step, ...] = ()):
        self.steps = steps

    def append(self, step: Step) -> Trace:
        return Trace(self.steps + (step,))

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def to_json(self) -> str:
        return json.dumps([{"primitive": s.primitive, "args": list(s.args),
                            "kwargs": dict(s.kwargs), "results": list(s.results)}
                           for s in self.steps])

    @staticmethod
    def from_json(text: str | bytes) -> Trace:
        """The trace ``to_json`` wrote; ParseError for text that is not one (checked step by
        step: a trace may come from a file or a shared database)."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError) as e:
            raise ParseError(f"a trace is the JSON text Trace.to_json writes; this is not JSON "
                             f"({type(e).__name__}: {str(e)[:120]})") from None
        if not isinstance(data, list):
            raise ParseError(f"a trace in JSON is a list of steps, got {type(data).__name__}")
        return Trace(tuple(_step(k, d) for k, d in enumerate(data)))

    def __str__(self) -> str:
        lines = []
        for s in self.steps:
            call = ", ".join([_py(a) for a in s.args] + [f"{k}={_py(v)}" for k, v in s.kwargs])
            lhs = ", ".join(_target(r) for r in s.results)
            if s.primitive in _LIST_RESULTS and len(s.results) == 1:
                lhs = f"[{lhs}]"      # a one-loop list unpacked, so that replaying it is valid
            lines.append((f"{lhs} = " if lhs else "") + f"sch.{s.primitive}({call})")
        return "\n".join(lines)
