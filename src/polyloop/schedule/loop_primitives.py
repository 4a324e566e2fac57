# SPDX-License-Identifier: Apache-2.0
"""Loop primitives of ``pl.Schedule``: the loop structure (split, reorder, tile, fuse, skew,
reverse, shift, merge, distribute) and how each loop runs (parallel, vectorize, unroll, bind,
annotate)."""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ScheduleError
from ..ir.loop_notes import NoteKey
from ..ir.loops import LoopKind
from ..ir.program import BufferRole, MemScope
from ..ir.thread_axis import ThreadAxis, parse_thread_axis
from ..poly.tree import LoopNode
from . import arguments as arg, fusion, hints, loops, state as st
from . import blocks, cross_thread
from . import recompute as rc
from . import verdicts as vd
from .core import ScheduleCore, _broken, _with_hint
from .trace import LoopHandle

THREAD_AXES = tuple(a.value for a in ThreadAxis)


def _factors(loop: LoopHandle, factors: Sequence[int | None] | None, factor: int | None,
             nparts: int | None) -> list[int | None]:
    given = [x for x in (factors, factor, nparts) if x is not None]
    if len(given) != 1:
        raise ScheduleError(f"split({getattr(loop, 'name', loop)}, ...) takes one of factors=[...], "
                            "factor= (the inner trip count) or nparts= (the outer trip count)")
    if factor is not None:
        return [None, factor]
    if nparts is not None:
        return [nparts, None]
    return arg.factor_list("split", factors)


def _symbolic(state: st.State, node: Any) -> bool:
    lo, hi = loops.loop_range(state, node)
    return lo is None or hi is None


class LoopPrimitives(ScheduleCore):
    """Primitives that change loops (mixed into ``pl.Schedule``)."""

    def split(self, loop: LoopHandle, factors: Sequence[int | None] | None = None, *,
              factor: int | None = None, nparts: int | None = None,
              names: Sequence[str] | None = None) -> list[LoopHandle]:
        """Split a loop into nested loops of the given trip counts (one may be None: inferred).

        Extents that do not divide and symbolic extents are exact: isl writes the bounds.
        TVM's spellings work too: ``factor=8`` is ``factors=[None, 8]`` and ``nparts=4`` is
        ``factors=[4, None]`` for a loop of constant extent; for a symbolic extent n,
        ``nparts=4`` makes 4 blocks of ``ceil(n / 4)`` iterations (as TVM does).

        >>> import polyloop as pl
        >>> A = pl.placeholder((100,), "float32", name="A")
        >>> B = pl.compute((100,), lambda i: A[i] * 2.0, name="B")
        >>> sch = pl.Schedule(B)
        >>> [h.name for h in sch.split(sch.get_loops(sch.get_block("B"))[0], factor=8)]
        ['i_0', 'i_1']
        """
        factors = _factors(loop, factors, factor, nparts)
        node = self._loop(loop, "split")
        factors = arg.factor_list("split", factors)
        names = arg.loop_names("split", names)
        if nparts is not None and _symbolic(self._state, node):
            new, nodes = loops.split_blocks(self._state, node, nparts, names)
            result = [self._handle(n) for n in nodes]
            kw = {"nparts": nparts} | ({"names": list(names)} if names else {})
            self._apply(new, "split", (loop,), kw, tuple(result))
            return result
        new, nodes = loops.split(self._state, node, factors, names)
        result = [self._handle(n) for n in nodes]
        kw = {"factors": list(factors)} | ({"names": list(names)} if names else {})
        self._apply(new, "split", (loop,), kw, tuple(result))
        return result

    def reorder(self, *loops_: LoopHandle) -> None:
        """Put perfectly nested loops in the given order (refused if a dependence would break).

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.reorder(j, i)
        >>> print(sch)
        for j in range(5):
            for i in range(6):
                B[i, j] = A[i, j] * 2.0
        """
        arg.distinct_loops("reorder", loops_, at_least=1)
        nodes = [self._loop(x, "reorder") for x in loops_]
        try:
            self._apply(loops.reorder(self._state, nodes), "reorder", tuple(loops_), {})
        except ScheduleError as e:
            fix = hints.skew_for_interchange(self._state, nodes) if _broken(e) else None
            if fix is None:
                raise
            raise _with_hint(e, f" It becomes legal after skew({fix[0]}, {fix[1]}, {fix[2]})"
                             ) from None

    def tile(self, loop_a: LoopHandle, loop_b: LoopHandle, ta: int, tb: int) -> list[LoopHandle]:
        """2-D tiling: split both loops and reorder to (a0, b0, a1, b1).

        Partial tiles are exact: the inner loops stop at the array's edge.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> [h.name for h in sch.tile(i, j, 4, 2)]
        ['i_0', 'j_0', 'i_1', 'j_1']
        >>> print(sch)
        for i_0 in range(2):
            for j_0 in range(3):
                for i_1 in range(min(4, -(4 * i_0) + 6)):
                    for j_1 in range(min(2, -(2 * j_0) + 5)):
                        B[4 * i_0 + i_1, 2 * j_0 + j_1] = A[4 * i_0 + i_1, 2 * j_0 + j_1] * 2.0
        """
        arg.distinct_loops("tile", (loop_a, loop_b), at_least=2)
        self._loop(loop_a, "tile"), self._loop(loop_b, "tile")
        arg.integer("tile", "the first tile size", ta, minimum=1)
        arg.integer("tile", "the second tile size", tb, minimum=1)
        # three recorded steps, applied all or nothing: a refused reorder undoes the splits
        saved_state, saved_trace = self._state, self.trace
        try:
            a0, a1 = self.split(loop_a, [None, ta])
            b0, b1 = self.split(loop_b, [None, tb])
            self.reorder(a0, b0, a1, b1)
        except ScheduleError as e:
            self._state, self.trace = saved_state, saved_trace
            hint = ""
            if _broken(e):
                f = hints.skew_for_tile(self._state, self._loop(loop_a, "tile"),
                                        self._loop(loop_b, "tile"), ta, tb)
                if f is not None:
                    hint = (f" Tiling becomes legal after skew({loop_a.name}, {loop_b.name}, "
                            f"{f}).")
            raise ScheduleError(f"tile({loop_a.name}, {loop_b.name}, {ta}, {tb}): {e}{hint}"
                                ) from None
        return [a0, b0, a1, b1]

    def fuse(self, *loops_: LoopHandle, name: str | None = None) -> LoopHandle:
        """Fuse directly nested loops (outermost first) into one loop.

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.fuse(i, j).name
        'i_j_fused'
        >>> print(sch)
        for i_j_fused in range(30):
            B[i_j_fused // 5, i_j_fused % 5] = A[i_j_fused // 5, i_j_fused % 5] * 2.0
        """
        arg.distinct_loops("fuse", loops_, at_least=2)
        if name is not None:
            arg.loop_name("fuse", name)
        nodes = [self._loop(x, "fuse") for x in loops_]
        new, fused = loops.fuse(self._state, nodes, name)
        h = self._handle(fused)
        self._apply(new, "fuse", tuple(loops_), {"name": name} if name else {}, (h,))
        return h

    def skew(self, outer: LoopHandle, inner: LoopHandle, factor: int = 1) -> None:
        """``inner += factor * outer``: the wavefront transformation that can make inner loops
        parallel (wavefront parallelism).

        >>> import polyloop as pl
        >>> @pl.script
        ... def sweep(A: pl.Buffer[(6, 5), "float64"]):
        ...     for i in range(1, 6):
        ...         for j in range(1, 5):
        ...             A[i, j] = A[i - 1, j] + A[i, j - 1]
        >>> sch = pl.Schedule(sweep)
        >>> i, j = sch.get_loops("A")
        >>> sch.skew(i, j, 1)
        >>> print(sch)
        for i in range(1, 6):
            for j in range(i + 1, i + 5):
                A[i, -i + j] = A[i - 1, -i + j] + A[i, -i + j - 1]
        """
        arg.distinct_loops("skew", (outer, inner), at_least=2)
        o, i = self._loop(outer, "skew"), self._loop(inner, "skew")
        self._apply(loops.skew(self._state, o, i, factor), "skew", (outer, inner),
                    {"factor": factor})

    def reverse(self, loop: LoopHandle) -> None:
        """Run a loop backwards (refused if a dependence would break).

        >>> import polyloop as pl
        >>> A = pl.placeholder((6, 5), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B"))
        >>> i, j = sch.get_loops("B")
        >>> sch.reverse(j)
        >>> print(sch)
        for i in range(6):
            for j in range(-4, 1):
                B[i, -j] = A[i, -j] * 2.0
        """
        node = self._loop(loop, "reverse")
        self._apply(loops.reverse(self._state, node), "reverse", (loop,), {})

    def shift(self, loop: LoopHandle, offset: int | str) -> None:
        """Run a loop's iterations at ``value + offset`` for every statement below it (an int, or
        an affine expression of size parameters such as ``"K - 1"``): lines nests up for
        ``merge``.

        >>> import polyloop as pl
        >>> @pl.script
        ... def two(A: pl.Buffer[(8,), "float64"], B: pl.Buffer[(8,), "float64"]):
        ...     for i in range(8):
        ...         A[i] = 1.0
        ...     for i in range(8):
        ...         B[i] = A[i] * 2.0
        >>> sch = pl.Schedule(two)
        >>> sch.shift(sch.get_loops("B")[0], 1)
        >>> print(sch)
        for i in range(8):
            A[i] = 1.0
        for i in range(1, 9):
            B[i - 1] = A[i - 1] * 2.0
        """
        node = self._loop(loop, "shift")
        self._apply(fusion.shift(self._state, node, offset), "shift", (loop, offset), {})

    def merge(self, first: LoopHandle, second: LoopHandle) -> LoopHandle:
        """Fuse two adjacent sibling loops into one that runs ``first``'s body, then
        ``second``'s, at each value (classic loop fusion; ``fuse`` collapses nested loops).
        Refused if a dependence would break: ``shift`` the second loop first to line them up.

        >>> import polyloop as pl
        >>> @pl.script
        ... def two(A: pl.Buffer[(8,), "float64"], B: pl.Buffer[(8,), "float64"]):
        ...     for i in range(8):
        ...         A[i] = 1.0
        ...     for i in range(8):
        ...         B[i] = A[i] * 2.0
        >>> sch = pl.Schedule(two)
        >>> sch.merge(sch.get_loops("A")[0], sch.get_loops("B")[0]).name
        'i'
        >>> print(sch)
        for i in range(8):
            A[i] = 1.0
            B[i] = A[i] * 2.0
        """
        arg.distinct_loops("merge", (first, second), at_least=2)
        a, b = self._loop(first, "merge"), self._loop(second, "merge")
        new, merged = fusion.merge(self._state, a, b, None)
        h = self._handle(merged)
        self._apply(new, "merge", (first, second), {}, (h,))
        return h

    def distribute(self, loop: LoopHandle, at: int = 1) -> tuple[LoopHandle, LoopHandle]:
        """Loop fission, the inverse of ``merge``: split ``loop`` into two loops over the same
        values, the first running its children before position ``at`` (its body's first ``at``
        statements or loops), the second the rest. Refused if a dependence would break.

        >>> import polyloop as pl
        >>> @pl.script
        ... def f(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
        ...     for i in range(n):
        ...         A[i] = 1.0
        ...         B[i] = A[i] * 2.0
        >>> sch = pl.Schedule(f)
        >>> first, second = sch.distribute(sch.get_loops("A")[0], at=1)
        >>> len(sch.state.root.children)
        2
        """
        node = self._loop(loop, "distribute")
        if isinstance(at, bool) or not isinstance(at, int):
            raise ScheduleError(f"distribute: at is a child position (int), got {at!r}")
        new, a, b = fusion.distribute(self._state, node, at, None)
        ha, hb = self._handle(a), self._handle(b)
        self._apply(new, "distribute", (loop,), {"at": at}, (ha, hb))
        return ha, hb

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
            at = _placement(self._state, dep.source, dep.sink) if dep is not None else None
            if at is not None and blocks.is_copy_statement(self._state, dep.source) and \
                    not _fresh_nest(self._state, dep.source, at):
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
                if dep is None or not blocks.is_copy_statement(self._state, dep.source) or \
                        self._state.program.buffer(dep.buffer).scope not in ON_CHIP:
                    return None
                at = _placement(self._state, dep.source, dep.sink)
                if at is None or not _fresh_nest(self._state, dep.source, at) or \
                        rc.under_work_items(self._state, at):
                    return None
                block = self._state.program.statement(dep.source).block_name
                self._state = rc.compute_at_recompute(self._state, block, at)
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


ON_CHIP = (MemScope.SHARED, MemScope.LOCAL)


def _placement(state: st.State, copy: str, consumer: str) -> LoopNode | None:
    """The innermost loop around both a copy and its consumer: where compute_at put it."""
    common = None
    for a, b in zip(state.stmt_path(copy), state.stmt_path(consumer)):
        if a.id != b.id:
            break
        common = a
    return common


def _fresh_nest(state: st.State, copy: str, at: LoopNode) -> bool:
    """Are the copy's loops below ``at`` still as compute_at made them (serial, one per
    iterator)? Copying per iteration builds new ones: what was done to them would be lost."""
    path = state.stmt_path(copy)
    own = path[[n.id for n in path].index(at.id) + 1:]
    return len(own) == len(state.program.statement(copy).iters) and \
        all(n.kind is LoopKind.SERIAL and not n.annotations for n in own)
