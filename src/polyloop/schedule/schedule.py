# SPDX-License-Identifier: Apache-2.0
"""``pl.Schedule``: explicit control of how a program runs, every step proven legal.

>>> import polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n,), "float32", name="A")
>>> B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
>>> sch = pl.Schedule(B)
>>> i0, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 8])
>>> sch.vectorize(i1)
>>> print(sch)
for i_0 in range((n - 1) // 8 + 1):
    for i_1 in vectorized(min(8, n - 8 * i_0)):
        B[8 * i_0 + i_1] = A[8 * i_0 + i_1] * 2.0
"""
from __future__ import annotations

import json
from typing import Any, Callable

from ..errors import ParseError, PolyloopError, foreign_errors
from ..ir.printer import loops_to_str
from ..poly.astgen import build_ast
from ..util.highlight import to_html
from .block_primitives import BlockPrimitives
from .kind_primitives import THREAD_AXES, KindPrimitives
from .loop_primitives import LoopPrimitives
from .memory_primitives import MemoryPrimitives
from .sampling import SamplingPrimitives
from .software_prefetch import PrefetchPrimitives
from .trace import REPLAYABLE, Trace, decode

__all__ = ["Schedule", "THREAD_AXES"]


class Schedule(LoopPrimitives, KindPrimitives, BlockPrimitives, PrefetchPrimitives,
               SamplingPrimitives, MemoryPrimitives):
    """A program plus the order its statement instances run in.

    Every primitive either returns with the schedule changed and the change recorded in
    ``trace``, or raises ``ScheduleError`` and leaves the schedule as it was. Dependences are
    exact (isl); declared reductions may be reordered (floating-point sums may round
    differently) but never run in parallel without ``rfactor``.

    >>> import polyloop as pl
    >>> @pl.script
    ... def prefix(A: pl.Buffer[(8,), "float64"]):
    ...     for i in range(1, 8):
    ...         A[i] = A[i - 1] + A[i]
    >>> sch = pl.Schedule(prefix)
    >>> try:
    ...     sch.parallel(sch.get_loops("A")[0])
    ... except pl.ScheduleError as e:
    ...     print(e)
    cannot parallelize loop 'i': it carries the RAW dependence A -> A on buffer A (distance
    (1,)); for instance A(i=7) reads A[6] written by A(i=6).
    >>> print(sch)      # unchanged; only the get_loops call is in the trace
    for i in range(1, 8):
        A[i] = A[i - 1] + A[i]
    >>> sch
    <Schedule of prefix: 1 steps>
    """

    # output --------------------------------------------------------------------------------------
    def loop_ast(self):
        """The scheduled loop nest (isl's AST converted to polyloop's loop AST).

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: A[i] + 1.0, name="B"))
        >>> ast = sch.loop_ast()
        >>> type(ast).__name__, ast.var, ast.body.buffer
        ('For', 'i', 'B')
        """
        return build_ast(self.program, self._state.root)

    def show(self, *, affine: bool = False) -> str:
        """The scheduled program as Python-like loops; with ``affine=True`` also each
        statement's schedule as an isl map.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: A[i] + 1.0, name="B"))
        >>> print(sch.show(affine=True))
        for i in range(8):
            B[i] = A[i] + 1.0
        <BLANKLINE>
        # affine schedules
        # B: { B[i] -> [i] : 0 <= i <= 7 }
        """
        text = loops_to_str(self.loop_ast())
        if affine:
            maps = self._state.schedule_map()
            text += "\n\n# affine schedules\n" + "\n".join(
                f"# {s}: {m}" for s, m in maps.items())
        return text

    def __str__(self) -> str:
        return self.show()

    def __repr__(self) -> str:
        return f"<Schedule of {self.program.name}: {len(self.trace)} steps>"

    def _repr_html_(self) -> str:
        """The scheduled loops, highlighted (Jupyter displays a schedule this way)."""
        return to_html(self.show(), "python")

    def copy(self) -> Schedule:
        """An independent schedule at the same point: changing one leaves the other as it was.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: A[i] + 1.0, name="B"))
        >>> other = sch.copy()
        >>> other.parallel(other.get_loops("B")[0])
        >>> print(other)
        for i in parallel(8):
            B[i] = A[i] + 1.0
        >>> print(sch)
        for i in range(8):
            B[i] = A[i] + 1.0
        """
        other = type(self).__new__(type(self))
        other._state, other._origin, other.trace = self._state, self._origin, self.trace
        other._rng = getattr(self, "_rng", None)
        other._forced = getattr(self, "_forced", ())
        return other

    @staticmethod
    @foreign_errors("Schedule.from_trace")
    def from_trace(program: Any, trace: Trace | str, *,
                   decisions: dict[int, Any] | None = None) -> Schedule:
        """Replay a trace (or its JSON) on a program: ``pl.Schedule.from_trace(prog, t)``.

        ``decisions`` maps the index of a sampling step in the trace to another decision: the
        values it draws replace the old ones in the steps that used them (a trace replays data
        flow; a space function that branches on a draw is re-run instead). A decision that is
        invalid for the program raises ``ScheduleError``.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: A[i] + 1.0, name="B"))
        >>> sch.split(sch.get_loops("B")[0], factor=4)
        [Loop('i_0', #...), Loop('i_1', #...)]
        >>> again = pl.Schedule.from_trace(sch.original, sch.trace.to_json())
        >>> print(again)
        for i_0 in range(2):
            for i_1 in range(4):
                B[4 * i_0 + i_1] = A[4 * i_0 + i_1] + 1.0
        >>> str(again) == str(sch)
        True
        """
        t = Trace.from_json(trace) if isinstance(trace, str) else trace
        if isinstance(program, (list, tuple)):
            sch = Schedule(*program)
        else:
            sch = Schedule(program)
        decisions = decisions or {}
        swap: dict[str, Any] = {}       # a recorded sample result (JSON) -> its replayed value
        for index, step in enumerate(t):
            if step.primitive not in REPLAYABLE:
                raise ParseError(f"unknown primitive {step.primitive!r} in trace; primitives: "
                                 + ", ".join(sorted(REPLAYABLE)))
            fn: Callable[..., Any] = getattr(sch, step.primitive)
            kwargs = {k: _replayed(v, swap) for k, v in step.kwargs}
            if index in decisions:
                if "decision" not in kwargs:
                    raise PolyloopError(f"step {index} of the trace ({step.primitive}) draws "
                                        "nothing; decisions= keys are sampling steps")
                kwargs["decision"] = decisions[index]
            out = fn(*[_replayed(a, swap) for a in step.args], **kwargs)
            if step.primitive.startswith("sample_"):
                new = out if isinstance(out, list) else [out]
                for old, value in zip(step.results, new):
                    if isinstance(old, dict):   # a drawn int, string or loop (unique keys)
                        swap[_key(old)] = value
        return sch


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def _replayed(v: Any, swap: dict[str, Any]) -> Any:
    """A recorded argument, with the results of replayed sampling steps put in."""
    if swap and _key(v) in swap:
        return swap[_key(v)]
    if isinstance(v, list):
        return [_replayed(x, swap) for x in v]
    return decode(v)
