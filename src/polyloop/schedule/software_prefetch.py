# SPDX-License-Identifier: Apache-2.0
"""``Schedule.prefetch``: a software prefetch hint on a loop (TVM's ``prefetch``, Halide's
``Func::prefetch``).

The hint is a loop annotation (key ``prefetch``) that names the block, the buffer, how many
iterations ahead and how; lowering (``lower.prefetch``) computes the region with isl from the
final program and loop tree and puts the prefetches at the top of the loop's body. Being an
annotation, it lives as long as the loop node: ``reorder``, ``parallel``, ``unroll``,
``annotate``, ``compute_at`` of other blocks and the rewriting primitives keep it (the region is
recomputed for what the block then accesses), while ``split``, ``fuse`` or ``merge`` of the loop
replace the node and drop the hint, as they drop every annotation: give the hint once the loop
structure is final.

``along=<an enclosing loop>`` looks ahead along that loop instead, for a block that may sit
elsewhere under it (``poly.prefetch_regions``): e.g. in the exponential's chunk loop of one
row, the chunk of the *next* row that the max pass will read at the same chunk index. The
annotation names the enclosing loop by its id (``AlongLoop``, shown as ``along loop i_1 (#7)``); if at lowering that
loop no longer encloses the hinted one, the hint becomes a comment saying so.
"""
from __future__ import annotations

from typing import Any

from ..errors import ScheduleError
from ..ir.loop_notes import AlongLoop, NoteKey, PrefetchHint
from ..ir.loops import LoopKind
from ..poly.prefetch_regions import Along, along_fits, lines_per_iteration, statement_paths
from ..poly.tree import LoopNode, statements_under
from . import loops
from .core import ScheduleCore
from .state import State, loop_label
from .trace import BlockHandle, LoopHandle

ANNOTATION = NoteKey.PREFETCH
MAX_LINES = 64          # cache lines per iteration: more is a misplaced hint, not a prefetch


def hints_of(node: LoopNode) -> list[PrefetchHint]:
    """The prefetch hints of a loop, in the order they were given."""
    return [v for k, v in node.annotations if k == ANNOTATION and isinstance(v, PrefetchHint)]


def block_statements_under(state: State, node: LoopNode, block: str) -> list[str]:
    """The statements of ``block`` inside loop ``node``."""
    return [s for s in statements_under(node) if state.program.statement(s).block_name == block]


def along_spec(path: list[LoopNode], outer: LoopNode, stmts: list[str]) -> Along:
    """The ``Along`` of a hint at the last loop of ``path`` along its enclosing ``outer``,
    for the block's statements ``stmts`` (all under ``outer``)."""
    index = [p.id for p in path].index(outer.id)
    return Along(index, statement_paths(path[:index + 1], stmts),
                 tuple(statements_under(path[-1])))


def _buffer_name(buffer: Any) -> str:
    name = buffer if isinstance(buffer, str) else getattr(buffer, "name", None)
    if not isinstance(name, str):
        raise ScheduleError(f"prefetch: expected a buffer name or tensor, got {buffer!r}")
    return name


def _with_hint(annotations: tuple, hint: PrefetchHint) -> tuple:
    """The loop's annotations with ``hint`` last, replacing an earlier hint of the same buffer
    for the same block."""
    kept = tuple((k, v) for k, v in annotations
                 if not (k == ANNOTATION and isinstance(v, PrefetchHint)
                         and (v.buffer, v.block) == (hint.buffer, hint.block)))
    return kept + ((ANNOTATION, hint),)


class PrefetchPrimitives(ScheduleCore):
    """The software prefetch hint (mixed into ``pl.Schedule``)."""

    def prefetch(self, block: BlockHandle | str, buffer: Any, loop: LoopHandle,
                 distance: int = 1, *, along: LoopHandle | None = None, locality: int = 3,
                 write: bool = False) -> None:
        """At each iteration of ``loop``, prefetch the part of ``buffer`` that ``block``'s
        accesses under ``loop`` touch ``distance`` iterations later.

        The region is exact (isl) and clipped to the iteration domain: nothing is prefetched
        at the last ``distance`` iterations, nor outside what the nest accesses. The C target
        emits one ``__builtin_prefetch(&buf[...], write, locality)`` per 64-byte cache line,
        OpenCL one ``prefetch(&buf[...], count)`` per row. It is a hint: results never change,
        so no dependence is checked. Refused: a loop not above the block, a buffer the block
        does not access there, ``distance < 1``, ``locality`` outside 0..3, a vectorized loop,
        and a region of more than 64 cache lines per iteration (or one that grows with a size):
        prefetch at an inner loop instead. A later ``split``/``fuse`` of ``loop`` drops the
        hint (see the module docstring).

        ``along``: a loop enclosing ``loop`` (and ``block``, which then need not be under
        ``loop``): at each iteration of ``loop``, prefetch what ``block`` touches ``distance``
        iterations of ``along`` later, at the same values of the loops outside ``along`` and,
        matched by position below ``along``, of the loops down to ``loop`` (the block's deeper
        loops take all their values; loops of one value, like a ``compute_at`` loop over one
        row, are not matched). E.g. the next row's chunk of a max pass, prefetched in the
        chunk loop of this row's exponentials: ``sch.prefetch("max", "X", j0, along=i)``,
        ``j0`` matched with the max pass's chunk loop. Also refused: ``along`` not enclosing
        ``loop`` or the block, and a block with fewer loops below ``along`` than ``loop`` has.

        >>> import numpy as np, polyloop as pl
        >>> n = pl.var("n")
        >>> A = pl.placeholder((n, n), "float32", name="A")
        >>> B = pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
        >>> sch = pl.Schedule(B)
        >>> i, j = sch.get_loops("B")
        >>> j0, j1 = sch.split(j, factors=[None, 16])
        >>> sch.prefetch("B", "A", j0, distance=2)
        >>> print(sch.show().splitlines()[1].strip())
        for j_0 in range((n - 1) // 16 + 1):  # prefetch=A for B, 2 iterations ahead, read, locality 3
        >>> mod = pl.build(sch)
        >>> "__builtin_prefetch(&A[" in mod.source
        True
        >>> a = np.random.rand(37, 37).astype("float32")
        >>> bool(np.allclose(mod(a), a * 2))
        True
        >>> sch.prefetch("B", "A", j0, along=i)     # the next row's chunk j0 instead
        >>> "__builtin_prefetch(&A[i + 1][16 * j_0" in pl.build(sch).source
        True
        """
        name = self._block(block, "prefetch")
        node = self._loop(loop, "prefetch")
        buf = _buffer_name(buffer)
        path = self._state.path(node.id)
        outer = None if along is None else self._along_loop(along, path, buf, name)
        hint = PrefetchHint(buf, name, distance, write, locality,
                            None if outer is None else AlongLoop(outer.name, outer.id))
        stmts = self._check_prefetch(hint, node, outer)
        self._check_region(hint, path, stmts, outer)
        new = loops.set_kind(self._state, node, node.kind,
                             annotations=_with_hint(node.annotations, hint))
        kw: dict[str, Any] = {"distance": distance, "locality": locality, "write": write}
        if along is not None:
            kw["along"] = along
        self._apply(new, "prefetch", (BlockHandle(name), buf, loop), kw)

    def _along_loop(self, along: LoopHandle, path: list[LoopNode], buf: str,
                    name: str) -> LoopNode:
        """The loop ``along`` names, refused unless it encloses the hinted loop (last of
        ``path``)."""
        node = path[-1]
        outer = self._loop(along, "prefetch")
        if outer.id not in [p.id for p in path[:-1]]:
            raise ScheduleError(
                f"prefetch of '{buf}' for '{name}' at loop "
                f"{loop_label(self._state, node)}: along loop "
                f"{loop_label(self._state, outer)} does not enclose it (its enclosing loops: "
                f"{', '.join(p.name for p in path[:-1]) or 'none'})")
        return outer

    def _check_region(self, hint: PrefetchHint, path: list[LoopNode], stmts: list[str],
                      outer: LoopNode | None) -> None:
        """Refuse a hint whose region per iteration of the loop (last of ``path``) is not a few
        cache lines, or, looked along ``outer``, does not fit the block's loops there."""
        buf, name = hint.buffer, hint.block
        spec = None if outer is None else along_spec(path, outer, stmts)
        where = f"prefetch of '{buf}' for '{name}' at loop {loop_label(self._state, path[-1])}"
        if spec is not None:
            why = along_fits(self.program, path, spec, buf)
            if why:
                raise ScheduleError(f"{where} along '{outer.name}': {why}")  # type: ignore
        lines = lines_per_iteration(self.program, path, stmts, buf, hint.distance, spec)
        if lines is None or lines > MAX_LINES:
            size = "grows with the sizes" if lines is None else f"spans up to {lines} lines"
            raise ScheduleError(
                f"{where}: the region one iteration touches {size}, more than {MAX_LINES} "
                f"cache lines of {64} bytes; prefetch at an inner loop (or split this one) so "
                "that one iteration touches a few lines")

    def _check_prefetch(self, hint: PrefetchHint, node: LoopNode,
                        outer: LoopNode | None = None) -> list[str]:
        """The block's statements under the loop (under ``outer``, the loop looked along, when
        given), after the argument checks."""
        where = (f"prefetch of '{hint.buffer}' for '{hint.block}' at loop "
                 f"{loop_label(self._state, node)}")
        if isinstance(hint.distance, bool) or not isinstance(hint.distance, int) \
                or hint.distance < 1:
            raise ScheduleError(f"{where}: distance must be an integer >= 1 (iterations "
                                f"ahead), got {hint.distance!r}")
        if isinstance(hint.locality, bool) or hint.locality not in (0, 1, 2, 3):
            raise ScheduleError(f"{where}: locality must be 0, 1, 2 or 3 (3: keep in every "
                                f"cache level, 0: no temporal locality), got {hint.locality!r}")
        if not isinstance(hint.write, bool):
            raise ScheduleError(f"{where}: write must be True or False, got {hint.write!r}")
        if node.kind is LoopKind.VECTORIZED:
            raise ScheduleError(f"{where}: the loop is vectorized; prefetch at a loop around it")
        if hint.buffer not in {b.name for b in self.program.buffers}:
            raise ScheduleError(f"{where}: unknown buffer; the program's buffers are "
                                + ", ".join(b.name for b in self.program.buffers))
        scope = node if outer is None else outer
        stmts = block_statements_under(self._state, scope, hint.block)
        if not stmts:
            inside = [p.name for p in self._state.stmt_path(
                next(s.name for s in self.program.statements if s.block_name == hint.block))]
            what = "the loop" if outer is None else f"along loop '{outer.name}'"
            raise ScheduleError(f"{where}: {what} is not above block '{hint.block}' (its "
                                f"loops: {', '.join(inside) or 'none'})")
        used = {a for s in stmts for a in self._buffers_of(s)}
        if hint.buffer not in used:
            raise ScheduleError(f"{where}: block '{hint.block}' does not access "
                                f"'{hint.buffer}' there; it accesses {', '.join(sorted(used))}")
        return stmts

    def _buffers_of(self, stmt: str) -> set[str]:
        s = self.program.statement(stmt)
        return {s.buffer} | {ld.buffer for ld in s.reads()}
