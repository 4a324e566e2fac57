# SPDX-License-Identifier: Apache-2.0
"""Loop primitives of ``pl.Schedule`` that set how a loop runs: parallel, vectorize, unroll,
bind (a GPU index) and annotate. Each is refused when the loop carries a dependence its kind
cannot keep; ``loop_primitives`` changes the loop structure."""
from __future__ import annotations

from typing import Any

from ..errors import ScheduleError
from ..ir.loop_notes import NoteKey
from ..ir.loops import LoopKind
from ..ir.program import BufferRole
from ..ir.thread_axis import ThreadAxis, parse_thread_axis
from . import arguments as arg, copy_placement, cross_thread, loops, state as st, symbolic_fuse
from . import verdicts as vd
from .core import ScheduleCore, _with_hint
from .trace import LoopHandle

THREAD_AXES = tuple(a.value for a in ThreadAxis)


class KindPrimitives(ScheduleCore):
    """parallel / vectorize / unroll / bind / annotate (mixed into ``Schedule``)."""

    def _exclusive(self, loop: LoopHandle, primitive: str, kind: LoopKind, **fields: Any) -> None:
        node = self._loop(loop, primitive)
        new = loops.set_kind(self._state, node, kind, **fields)
        bad = vd.check_parallel(new, new.loop(node.id))  # type: ignore[arg-type]
        if bad is not None:
            hint = ""
            if bad.dependence.reduction:
                hint = " It is a reduction loop: split it and use rfactor, or choose a spatial loop."
            raise ScheduleError(f"cannot {primitive} loop {st.loop_label(self._state, node)}: it "
                                "carries "
                                f"{bad.summary()}; for instance {bad.describe()}.{hint}",
                                dependence=bad.evidence())
        return new  # type: ignore[return-value]

    def parallel(self, loop: LoopHandle) -> None:
        """Run the iterations of a loop on all cores (OpenMP). Refused if it carries a dependence.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.parallel(i)
        >>> print(sch)
        for i in parallel(6):
            for j in range(5):
                B[i, j] = A[i, j] * 2.0
        """
        node = self._loop(loop, "parallelize")
        if symbolic_fuse.group(self._state, node) is not None:
            self._apply(symbolic_fuse.set_kind(self._state, node, LoopKind.PARALLEL,
                                               "parallelize"), "parallel", (loop,), {})
            return
        for anc in self._state.path(node.id)[:-1]:
            if anc.kind is LoopKind.PARALLEL:
                raise ScheduleError(f"cannot parallelize loop {st.loop_label(self._state, node)}: "
                                    "it is inside parallel loop "
                                    f"{st.loop_label(self._state, anc)}; fuse them instead")
        new = self._exclusive(loop, "parallelize", LoopKind.PARALLEL)
        self._apply(new, "parallel", (loop,), {})  # type: ignore[arg-type]

    def vectorize(self, loop: LoopHandle) -> None:
        """Run an innermost loop with SIMD instructions. Refused if it carries a dependence.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.vectorize(j)
        >>> print(sch)
        for i in range(6):
            for j in vectorized(5):
                B[i, j] = A[i, j] * 2.0
        """
        node = self._loop(loop, "vectorize")
        if symbolic_fuse.group(self._state, node) is not None:
            self._apply(symbolic_fuse.set_kind(self._state, node, LoopKind.VECTORIZED,
                                               "vectorize"), "vectorize", (loop,), {})
            return
        inner = st.inner_loops(self._state, node)
        if inner:
            raise ScheduleError(f"cannot vectorize loop {st.loop_label(self._state, node)}: "
                                f"it contains loop '{inner[0].name}'; vectorize an innermost loop")
        new = self._exclusive(loop, "vectorize", LoopKind.VECTORIZED)
        self._apply(new, "vectorize", (loop,), {})  # type: ignore[arg-type]

    def unroll(self, loop: LoopHandle, factor: int | None = None) -> None:
        """Unroll a loop fully (``factor=None``) or by ``factor``.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.unroll(j)
        >>> print(sch)
        for i in range(6):
            for j in unrolled(5):
                B[i, j] = A[i, j] * 2.0
        """
        node = self._loop(loop, "unroll")
        if factor is not None and (not isinstance(factor, int) or isinstance(factor, bool)
                                   or not 1 <= factor <= arg.MAX_CONSTANT):
            raise ScheduleError(f"unroll factor must be a positive integer, got {factor!r:.60} "
                                f"({type(factor).__name__}); None unrolls fully")
        new = loops.set_kind(self._state, node, LoopKind.UNROLLED, unroll_factor=factor)
        self._apply(new, "unroll", (loop,), {"factor": factor} if factor else {})

    def bind(self, loop: LoopHandle, thread_axis: "str | ThreadAxis") -> None:
        """Map a loop onto a GPU index: ``"blockIdx.x"``, ``"threadIdx.y"``, or the kernel tags
        ``"g.0"`` (work-group index 0 = blockIdx.x), ``"l.1"`` (work-item index 1 =
        threadIdx.y), or a ``ThreadAxis``. A shared or local copy that ``compute_at`` placed
        once for several iterations of the loop is copied in every iteration instead (each
        work-group fills its own tile).

        >>> import polyloop as pl
        >>> A = pl.placeholder((100,), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((100,), lambda i: A[i] * 2, name="B"))
        >>> io, ii = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 32])
        >>> sch.bind(io, "g.0"); sch.bind(ii, "threadIdx.x")
        """
        axis = parse_thread_axis(thread_axis)
        try:
            new = self._exclusive(loop, "bind", LoopKind.THREAD, thread=axis)
        except ScheduleError as e:
            dep = e.dependence
            copied = self._copies_per_iteration(loop, axis, e)
            if copied is not None:
                self._apply(copied, "bind", (loop, axis.value), {})  # type: ignore[arg-type]
                return
            if copy_placement.changed_copy(self._state, dep):
                raise _with_hint(e, f" The copy '{dep.source}' serves several iterations of the "
                                 "loop: bind the loops around it before changing the copy's own "
                                 "loops, or compute_at(..., recompute=True) to copy in every "
                                 "iteration") from None
            if not (axis.is_item and dep is not None and dep.reduction
                    and dep.source == dep.sink):
                raise
            # a reduction loop on work-items: a tree reduction across them
            try:
                new = cross_thread.bind_reduction(self._state, self._loop(loop, "bind"), axis,
                                                  dep.source)
            except ScheduleError as why:
                raise ScheduleError(f"{e}\nA tree reduction across the work-items cannot take "
                                    f"its place either: {why}", dependence=dep) from None
        self._apply(new, "bind", (loop, axis.value), {})  # type: ignore[arg-type]

    def _copies_per_iteration(self, loop: LoopHandle, axis: ThreadAxis, refusal: ScheduleError
                              ) -> st.State | None:
        """``bind`` refused because a copy into on-chip memory (a shared or local cache stage
        moved in with compute_at) serves several iterations of the loop: each iteration
        copies what it reads instead (TVM's compute_at), and the loop is bound. None when
        that does not make the loop legal."""
        saved, dep = self._state, refusal.dependence
        try:
            for _ in range(len(self._state.program.statements)):
                placed = copy_placement.copy_per_iteration(self._state, dep)
                if placed is None:
                    return None
                self._state = placed
                try:
                    return self._exclusive(loop, "bind", LoopKind.THREAD, thread=axis)
                except ScheduleError as again:
                    dep = again.dependence
            return None
        except ScheduleError:
            return None
        finally:
            self._state = saved

    def annotate(self, loop: LoopHandle, key: str, value: Any) -> None:
        """Attach a key/value annotation to a loop (printed as a comment; read by targets).

        Keys the C target reads: ``"nontemporal"``, value a buffer name or several separated
        by commas: the whole-vector stores of those buffers in the vectorized loops at or under
        ``loop`` become streaming stores (no write-allocate; for outputs not read again soon),
        followed by an ``sfence`` (see ``polyloop.codegen.vector_stream``).

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.annotate(i, "nontemporal", "B")
        >>> print(sch)
        for i in range(6):  # nontemporal=B
            for j in range(5):
                B[i, j] = A[i, j] * 2.0
        """
        node = self._loop(loop, "annotate")
        key, value = arg.annotation("annotate", key, value)
        note = NoteKey.of(key)      # a key a later layer acts on becomes typed here
        if note is NoteKey.NONTEMPORAL:
            self._check_stored_buffers(str(value))
        ann = tuple((k, v) for k, v in node.annotations if k != key) + ((note, value),)
        new = loops.set_kind(self._state, node, node.kind, annotations=ann)
        self._apply(new, "annotate", (loop, key, value), {})

    def _check_stored_buffers(self, value: str) -> None:
        """The buffers a ``nontemporal`` annotation names exist and are written."""
        roles = {b.name: b.role for b in self.program.buffers}
        names = [n.strip() for n in value.split(",")]
        unknown = [n for n in names if n not in roles]
        if unknown or not all(names):
            raise ScheduleError(f"annotate 'nontemporal': unknown buffer(s) {unknown or names} "
                                f"in {value!r}; give the names of written buffers, separated "
                                f"by commas, from: {', '.join(sorted(roles))}")
        inputs = [n for n in names if roles[n] is BufferRole.INPUT]
        if inputs:
            raise ScheduleError(f"annotate 'nontemporal': {', '.join(inputs)} is an input, which "
                                "the program never stores; name an output or a temporary")

