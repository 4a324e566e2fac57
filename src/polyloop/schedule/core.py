# SPDX-License-Identifier: Apache-2.0
"""The part of ``pl.Schedule`` every primitive stands on: the state, the trace, argument checks
and navigation (``get_block``, ``get_loops``, producers and consumers). The primitives live in
``loop_primitives`` (loop structure), ``kind_primitives`` (how a loop runs) and
``block_primitives`` (moving and rewriting blocks), among others; ``schedule.Schedule`` puts
them together."""
from __future__ import annotations

import random
from typing import Any, Sequence

from ..errors import PolyloopError, ScheduleError
from ..ir.program import Program
from ..poly.tree import LoopNode
from . import blocks, state as st, symbolic_fuse
from . import verdicts as vd
from .trace import BlockHandle, LoopHandle, Step, Trace, encode


def _with_hint(e: ScheduleError, hint: str) -> ScheduleError:
    text = str(e)
    return ScheduleError(text + ("" if text.endswith(".") else ".") + hint + ".",
                         dependence=e.dependence)


def _broken(e: ScheduleError) -> bool:
    """Was the primitive refused for a dependence (not for a wrong argument)?"""
    return e.dependence is not None


def _call_text(primitive: str, args: tuple, kwargs: dict[str, Any]) -> str:
    """``reorder(j, i)``: the call as the user wrote it, for error messages."""
    def one(v: Any) -> str:
        if isinstance(v, (LoopHandle, BlockHandle)):
            return v.name
        return repr(v)
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return f"{primitive}({', '.join(parts)})"


class ScheduleCore:
    """State, trace and navigation shared by all schedule primitives (see ``pl.Schedule``)."""

    def __init__(self, *outputs: Any, args: Sequence[Any] | None = None,
                 name: str | None = None, seed: int | None = None):
        if len(outputs) == 1 and isinstance(outputs[0], (list, tuple)):
            outputs = tuple(outputs[0])   # pl.Schedule([T0, T1]), as TVM's create_schedule
        if len(outputs) == 1 and isinstance(outputs[0], Program):
            program = outputs[0]
        elif outputs and hasattr(outputs[0], "to_program"):
            # a front end's output (tensors): it knows how to become a Program
            program = outputs[0].to_program(*outputs[1:], args=args, name=name)
        else:
            raise PolyloopError(f"Schedule() takes a Program or output tensors, got {outputs!r}")
        self._state = st.initial(program)
        self._origin = program
        self.trace = Trace()
        self._rng = random.Random(seed)     # the sampling primitives' draws
        self._forced: tuple = ()
    @property
    def program(self) -> Program:
        """The current program (statements change with inlining, caching and rfactor)."""
        return self._state.program

    @property
    def original(self) -> Program:
        """The program the schedule started from (its meaning never changes)."""
        return self._origin

    @property
    def state(self) -> st.State:
        return self._state

    def _record(self, primitive: str, args: tuple, kwargs: dict[str, Any], results: tuple) -> None:
        self.trace = self.trace.append(Step(primitive, tuple(encode(a) for a in args),
                                            tuple((k, encode(v)) for k, v in kwargs.items()),
                                            tuple(encode(r) for r in results)))

    def _apply(self, new: st.State, primitive: str, args: tuple, kwargs: dict[str, Any],
               results: tuple = ()) -> None:
        vd.verify(new, _call_text(primitive, args, kwargs))
        self._state = new
        self._record(primitive, args, kwargs, results)

    def _loop(self, loop: LoopHandle, primitive: str) -> LoopNode:
        if not isinstance(loop, LoopHandle):
            raise ScheduleError(f"{primitive}: expected a loop from get_loops/split/..., got "
                                f"{loop!r}")
        node = self._state.loop(loop.id)
        if node is not None and node.name != loop.name:
            raise ScheduleError(f"{primitive}: loop '{loop.name}' is not a loop of this schedule "
                                f"(its loop #{loop.id} is '{node.name}'); use the handles that "
                                "this schedule's get_loops/split/... returned")
        if node is None:
            raise ScheduleError(f"{primitive}: loop '{loop.name}' is no longer in the schedule "
                                "(a primitive replaced it, e.g. split or fuse); use the loops "
                                "that primitive returned")
        top = symbolic_fuse.hidden(self._state, node)
        if top is not None:
            raise ScheduleError(f"{primitive}: loop '{loop.name}' was fused into loop "
                                f"'{top.name}'; use the loop fuse returned")
        if symbolic_fuse.group(self._state, node) is not None and \
                primitive not in symbolic_fuse.ALLOWED:
            raise ScheduleError(
                f"{primitive}: loop '{loop.name}' is a fused loop of symbolic extent, which the "
                "code makes from the loops it fused (isl cannot express n * m iterations): "
                "split, parallel, vectorize and unroll apply to it; apply other primitives "
                "before fusing, or to the loops inside it")
        return node

    def _block(self, block: BlockHandle | str, primitive: str) -> str:
        name = block.name if isinstance(block, BlockHandle) else block
        if not isinstance(name, str):
            raise ScheduleError(f"{primitive}: expected a block from get_block, got {block!r}")
        blocks.block_statements(self._state, name)
        return name

    @staticmethod
    def _handle(n: LoopNode) -> LoopHandle:
        return LoopHandle(n.id, n.name)

    # navigation --------------------------------------------------------------------------------
    def get_block(self, name: str) -> BlockHandle:
        """The block computing tensor ``name``: ``sch.get_block("C")``.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.get_block("C")
        Block('C')
        """
        self._block(name, "get_block")
        return BlockHandle(name)

    def blocks(self) -> list[BlockHandle]:
        """All blocks, in program order.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.blocks()
        [Block('B'), Block('C')]
        """
        return [BlockHandle(n) for n in dict.fromkeys(s.block_name for s in self.program.statements)]

    def get_loops(self, block: BlockHandle | str) -> list[LoopHandle]:
        """The loops around the block's main statement, outermost first.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> [h.name for h in sch.get_loops("B")]
        ['i', 'j']
        """
        name = self._block(block, "get_loops")
        main = blocks.main_statement(self._state, name)
        result = [self._handle(n) for n in self._state.stmt_path(main.name)
                  if symbolic_fuse.hidden(self._state, n) is None]
        self._record("get_loops", (BlockHandle(name),), {}, tuple(result))
        return result

    def _neighbours(self, block: BlockHandle | str, producers: bool) -> list[BlockHandle]:
        name = self._block(block, "get_producers" if producers else "get_consumers")
        stmts = {s.name for s in blocks.block_statements(self._state, name)}
        found: dict[str, None] = {}
        for d in self._state.deps:
            if d.kind.value != "RAW":
                continue
            if producers and d.sink in stmts and d.source not in stmts:
                found.setdefault(self.program.statement(d.source).block_name)
            if not producers and d.source in stmts and d.sink not in stmts:
                found.setdefault(self.program.statement(d.sink).block_name)
        return [BlockHandle(n) for n in found]

    def get_producers(self, block: BlockHandle | str) -> list[BlockHandle]:
        """Blocks whose results this block reads.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.get_producers("C"), sch.get_producers("B")
        ([Block('B')], [])
        """
        return self._neighbours(block, True)

    def get_consumers(self, block: BlockHandle | str) -> list[BlockHandle]:
        """Blocks that read this block's results.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.get_consumers("B"), sch.get_consumers("C")
        ([Block('C')], [])
        """
        return self._neighbours(block, False)
