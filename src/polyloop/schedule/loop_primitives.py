# SPDX-License-Identifier: Apache-2.0
"""Loop primitives of ``pl.Schedule``: the loop structure (split, reorder, tile, fuse, skew,
reverse, shift, merge, distribute). How each loop runs (parallel, vectorize, unroll, bind,
annotate) is in ``kind_primitives``."""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ScheduleError
from . import arguments as arg, fusion, hints, loops, state as st, symbolic_fuse
from .core import ScheduleCore, _broken, _with_hint
from .trace import LoopHandle


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
        if symbolic_fuse.group(self._state, node) is not None:
            new, nodes = symbolic_fuse.split(self._state, node, factors, names)
            result = [self._handle(n) for n in nodes]
            kw = {"factors": list(factors)} | ({"names": list(names)} if names else {})
            self._apply(new, "split", (loop,), kw, tuple(result))
            return result
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
