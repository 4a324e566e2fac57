# SPDX-License-Identifier: Apache-2.0
"""Storage primitives of ``pl.Schedule`` for GPU memory: ``storage_align`` (padded rows of a
shared tile, free of bank conflicts) and ``double_buffer`` (a tile filled for the next
iteration while the current one is read). Neither changes a statement or the loop tree: each
records a decision on the temporary that lowering applies when it sizes it
(``lower.storage``), and each is checked now on the current schedule."""
from __future__ import annotations

from dataclasses import replace

from ..errors import BrokenDependence, ScheduleError
from ..ir.program import Buffer, BufferRole, MemScope, StorageAlign
from ..poly.double_buffer import double_buffered, overlap, rotation
from . import blocks
from .core import ScheduleCore
from .state import State
from .trace import BlockHandle
from .verdicts import inherit_sequence_edit


def _written_temp(state: State, block: str, primitive: str) -> Buffer:
    """The temporary ``block`` writes (a cache or prefetch stage)."""
    names = {s.buffer for s in blocks.block_statements(state, block)}
    if len(names) != 1:
        raise ScheduleError(f"{primitive}: block '{block}' writes {', '.join(sorted(names))}; "
                            "give the block that fills one temporary")
    buf = state.program.buffer(names.pop())
    if buf.role is not BufferRole.TEMP:
        raise ScheduleError(f"{primitive}: block '{block}' writes '{buf.name}', an argument of "
                            "the program; only a temporary's storage can change (make one with "
                            "cache_read or add_prefetch)")
    return buf


def _with_buffer(state: State, buf: Buffer) -> State:
    program = state.program.replace(buffers=tuple(buf if b.name == buf.name else b
                                                  for b in state.program.buffers))
    new = State(program, state.root, state.deps, state.next_id)
    inherit_sequence_edit(state, new)   # same statements and tree: every verdict holds
    return new


class MemoryPrimitives(ScheduleCore):
    """storage_align and double_buffer (mixed into ``pl.Schedule``)."""

    def storage_align(self, block: BlockHandle | str, buffer: str, axis: int, factor: int,
                      offset: int) -> None:
        """Pad the temporary ``buffer`` that ``block`` writes so that the stride of dimension
        ``axis`` is ``offset`` modulo ``factor`` elements (TVM's spelling): a shared tile of
        16-float rows read down a column by the threads of a warp hits one memory bank per
        row; ``storage_align(..., axis=-2, factor=16, offset=1)`` makes its rows 17 floats (odd:
        32 rows fall in 32 banks). ``axis`` counts the temporary's dimensions (a prefetch
        copy's start with its outer loops: count from the end, -2 is the row); the stride is
        that of the tile as lowering sizes it (the box one iteration uses), and the pad is
        never indexed. Results never change, so no dependence is checked; where lowering
        cannot pad (that dimension compacted away, no size fits), the generated code says so
        in a comment.

        >>> import polyloop as pl
        >>> knl = pl.make_kernel("{ [i, j] : 0 <= i < 64 and 0 <= j < 16 }",
        ...                      "out[j, i] = a[i, j] * 2", name="t")
        >>> knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.1")
        >>> knl = pl.add_prefetch(knl, "a", ["i_inner", "j"])
        >>> sch = knl.schedule
        >>> sch.storage_align("a_fetch", "a_fetch", axis=-2, factor=16, offset=1)
        >>> "a_fetch[16][17]" in pl.build(sch, target="opencl").source
        True
        """
        name = self._block(block, "storage_align")
        buf = _written_temp(self._state, name, "storage_align")
        if buffer != buf.name:
            raise ScheduleError(f"storage_align: block '{name}' writes '{buf.name}', not "
                                f"{buffer!r}")
        if isinstance(axis, bool) or not isinstance(axis, int) or \
                not -buf.ndim <= axis < buf.ndim - 1 or axis == -1:
            raise ScheduleError(f"storage_align: axis must be a dimension of '{buf.name}' other "
                                f"than its last ({-buf.ndim}..-2 or 0..{buf.ndim - 2}), got "
                                f"{axis!r}")
        axis %= buf.ndim
        for what, v, low in (("factor", factor, 1), ("offset", offset, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ScheduleError(f"storage_align: {what} must be an int >= {low}, got {v!r}")
        if offset >= factor:
            raise ScheduleError(f"storage_align: offset {offset} must be less than factor "
                                f"{factor} (a stride modulo {factor})")
        aligned = replace(buf, align=tuple(a for a in buf.align if a.axis != axis)
                          + (StorageAlign(axis, factor, offset),))
        self._apply(_with_buffer(self._state, aligned), "storage_align",
                    (BlockHandle(name), buf.name, axis, factor, offset), {})

    def double_buffer(self, block: BlockHandle | str) -> None:
        """Store the 'shared' or 'local' temporary that ``block`` fills as two tiles used in
        turn by the iterations of its home loop (the innermost loop around all its uses): the
        copy for iteration ``k + 1`` may then run while iteration ``k`` reads its tile, and
        the barrier before each refill is gone. With ``distribute``, ``shift(copy loop, -1)``
        and ``merge`` the copy is issued one iteration early (software pipelining).

        The temporary must have a dimension indexed by the home loop's value plus a constant
        (a prefetch copy's outer loop index), the home loop must run in order, and every
        element must be used within two consecutive iterations; otherwise refused, naming the
        dependence that two tiles would break. Proven with isl on the current schedule, and
        again when lowering (where it no longer holds, one tile is used and a comment in the
        generated code says why).

        >>> import polyloop as pl
        >>> from polyloop import ops
        >>> sch = ops.matmul_gpu_shared()
        >>> sch.double_buffer("a_fetch")
        >>> "a_fetch[2][64][16]" in pl.build(sch, target="opencl").source
        True
        """
        name = self._block(block, "double_buffer")
        state = self._state
        buf = _written_temp(state, name, "double_buffer")
        if buf.scope is MemScope.GLOBAL:
            raise ScheduleError(f"double_buffer: '{buf.name}' is in global memory; double "
                                "buffering is for a 'shared' or 'local' temporary (cache_read "
                                "into 'shared', or add_prefetch)")
        rot = rotation(state.program, state.root, buf.name)
        if not isinstance(rot, str):
            far = overlap(rot)
            if far is not None:
                example = (f"an element {'written' if far[0] in rot.writers else 'read'} at "
                           f"iteration k of loop '{rot.loop.name}' is "
                           f"{'written' if far[1] in rot.writers else 'read'} at iteration "
                           f"k + {far[2]}")
                first_writes, last_writes = far[0] in rot.writers, far[1] in rot.writers
                kind = ("WAW" if first_writes and last_writes else
                        "WAR" if last_writes else "RAW")
                raise ScheduleError(
                    f"double_buffer({name}) would break the dependence {far[0]} -> {far[1]} "
                    f"on '{buf.name}': {example}, after the copy for k + 2 reuses its tile; "
                    "keep the copy at most one iteration ahead",
                    dependence=BrokenDependence(kind, far[0], far[1], buf.name, None, False,
                                                example))
        result = double_buffered(state.program, state.root, buf.name)
        if isinstance(result, str):
            raise ScheduleError(f"double_buffer({name}): '{buf.name}' cannot alternate between "
                                f"two tiles: {result}")
        self._apply(_with_buffer(state, replace(buf, stages=2)), "double_buffer",
                    (BlockHandle(name),), {})
