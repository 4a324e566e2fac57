# SPDX-License-Identifier: Apache-2.0
"""Block primitives of ``pl.Schedule``: where blocks are computed (compute_at, inlining,
decompose_reduction), rewrites that add blocks or buffers (cache_read, cache_write, rfactor,
transform_layout) and tensorize."""
from __future__ import annotations

from typing import Any, Callable

from ..errors import ScheduleError
from ..ir.expr import Var, as_expr
from ..poly.tree import LoopNode
from . import arguments as arg, blocks, hints, rewrites
from . import verdicts as vd
from . import tensorize as tz
from . import recompute as rc
from .recompute import under_work_items
from .core import ScheduleCore, _broken, _with_hint
from .trace import BlockHandle, LoopHandle


def _lambda_text(fn: Callable[..., Any], ndim: int) -> str:
    """Replayable text of an index map: call it on named variables and print the result."""
    names = [f"x{k}" for k in range(ndim)]
    out = fn(*[Var(n) for n in names])
    out = out if isinstance(out, (tuple, list)) else (out,)
    return f"lambda {', '.join(names)}: ({', '.join(str(as_expr(e)) for e in out)},)"


class BlockPrimitives(ScheduleCore):
    """Primitives that move or rewrite blocks (mixed into ``pl.Schedule``)."""

    def compute_at(self, block: BlockHandle | str, loop: LoopHandle, *,
                   recompute: bool = False) -> None:
        """Compute a producer inside a consumer's loop: each instance runs in the first iteration
        that needs it (exact footprints, e.g. a convolution's halo).

        With ``recompute=True`` every iteration of ``loop`` (and of the loops around it)
        computes all the elements it reads, halo included, into a temporary of its own, so
        iterations share nothing and parallel loops or GPU blocks around it stay legal. A copy
        (a ``cache_read`` stage) that the iterations cannot share, such as a shared tile under
        work-group loops, is placed so without asking, as TVM's compute_at places it:

        >>> import polyloop as pl
        >>> A = pl.placeholder((10,), "float32", name="A")
        >>> B = pl.compute((10,), lambda i: A[i] * 2.0, name="B")
        >>> C = pl.compute((8,), lambda i: B[i] + B[i + 2], name="C")
        >>> sch = pl.Schedule(C)
        >>> io, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
        >>> sch.parallel(io)
        >>> sch.compute_at(sch.get_block("B"), io, recompute=True)
        >>> print(sch)  # doctest: +NORMALIZE_WHITESPACE
        for i_0 in parallel(2):
            for B_dim_0 in range(6):
                B[i_0, 4 * i_0 + B_dim_0] = A[4 * i_0 + B_dim_0] * 2.0
            for i_1 in range(4):
                C[4 * i_0 + i_1] = B[i_0, 4 * i_0 + i_1] + B[i_0, 4 * i_0 + i_1 + 2]
        """
        name, node = self._block(block, "compute_at"), self._loop(loop, "compute_at")
        if not isinstance(recompute, bool):
            raise ScheduleError(f"compute_at: recompute= is True or False, got {recompute!r}")
        if recompute:
            self._apply(rc.compute_at_recompute(self._state, name, node), "compute_at",
                        (BlockHandle(name), loop), {"recompute": True})
            return
        try:
            self._apply(blocks.compute_at(self._state, name, node), "compute_at",
                        (BlockHandle(name), loop), {})
        except ScheduleError as e:
            if not _broken(e):
                raise
            if blocks.is_copy(self._state, name) and self._copy_per_iteration(name, node, loop):
                return
            raise _with_hint(e, hints.compute_at_hint(self._state, name, node,
                                                      reverse=False)) from None

    def _copy_per_iteration(self, name: str, node: LoopNode, loop: LoopHandle) -> bool:
        """A copy (a cache stage) that one iteration cannot share with the next (a GPU
        work-group's tile, a parallel thread's halo) runs once per iteration of the loop and
        the loops around it, as TVM's compute_at and Loo.py's prefetch do: always legal while
        what it copies does not change, which ``recompute`` checks."""
        if under_work_items(self._state, node):
            return False    # a copy per work-item: lowering cannot build it yet
        try:
            new = rc.compute_at_recompute(self._state, name, node)
        except ScheduleError:
            return False
        self._apply(new, "compute_at", (BlockHandle(name), loop), {})
        return True

    def compute_root(self, block: BlockHandle | str) -> None:
        """Undo compute_at: the block gets a nest of its own at the top level, placed before
        the nest that computed it (after it, when that is what the dependences need).

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> C = pl.compute((8,), lambda i: B[i] * 2.0, name="C")
        >>> sch = pl.Schedule(C)
        >>> sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
        >>> sch.compute_root(sch.get_block("B"))
        >>> print(sch)
        for i in range(8):
            B[i] = A[i] + 1.0
        for i in range(8):
            C[i] = B[i] * 2.0
        """
        name = self._block(block, "compute_root")
        try:
            new = blocks.compute_root(self._state, name)
            vd.verify(new, f"compute_root({name})")
        except ScheduleError as before:
            try:    # a consumer moved in with reverse_compute_at goes after its producers
                new = blocks.compute_root(self._state, name, after=True)
                vd.verify(new, f"compute_root({name})")
            except ScheduleError:
                raise before from None
        self._apply(new, "compute_root", (BlockHandle(name),), {})

    def reverse_compute_at(self, block: BlockHandle | str, loop: LoopHandle) -> None:
        """Compute a consumer inside a producer's loop, right after what it reads is ready.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.reverse_compute_at("C", sch.get_loops("B")[0])
        >>> print(sch)
        for i in range(8):
            B[i] = A[i] + 1.0
            C[i] = B[i] * 2.0
        """
        name, node = self._block(block, "reverse_compute_at"), self._loop(loop, "reverse_compute_at")
        try:
            self._apply(blocks.reverse_compute_at(self._state, name, node), "reverse_compute_at",
                        (BlockHandle(name), loop), {})
        except ScheduleError as e:
            if not _broken(e):
                raise
            raise _with_hint(e, hints.compute_at_hint(self._state, name, node,
                                                      reverse=True)) from None

    def decompose_reduction(self, block: BlockHandle | str, loop: LoopHandle) -> BlockHandle:
        """Move a reduction's initialization right before ``loop`` (inside the loops above it);
        returns the initialization block (``C_init``), whose loops can then be vectorized.

        >>> import polyloop as pl
        >>> A = pl.placeholder((4, 6), "float32", name="A")
        >>> k = pl.reduce_axis((0, 6), name="k")
        >>> sch = pl.Schedule(pl.compute((4,), lambda i: pl.sum(A[i, k], axis=k), name="S"))
        >>> i, k = sch.get_loops("S")
        >>> sch.decompose_reduction("S", k)
        Block('S_init')
        >>> print(sch)
        for i in range(4):
            S[i] = 0.0
            for k in range(6):
                S[i] += A[i, k]
        """
        name, node = self._block(block, "decompose_reduction"), self._loop(loop, "decompose_reduction")
        new = blocks.decompose_reduction(self._state, name, node)
        init = BlockHandle(next(s.name for s in blocks.block_statements(new, name) if s.is_init))
        self._apply(new, "decompose_reduction", (BlockHandle(name), loop), {}, (init,))
        return init

    def compute_inline(self, block: BlockHandle | str) -> None:
        """Substitute an elementwise block into its consumers; its buffer disappears.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.compute_inline("B")
        >>> print(sch)
        for i in range(8):
            C[i] = (A[i] + 1.0) * 2.0
        """
        name = self._block(block, "compute_inline")
        self._apply(blocks.compute_inline(self._state, name), "compute_inline",
                    (BlockHandle(name),), {})

    def reverse_compute_inline(self, block: BlockHandle | str) -> None:
        """Substitute an elementwise consumer into its (only) producer.

        >>> import polyloop as pl
        >>> A = pl.placeholder((8,), "float32", name="A")
        >>> B = pl.compute((8,), lambda i: A[i] + 1.0, name="B")
        >>> sch = pl.Schedule(pl.compute((8,), lambda i: B[i] * 2.0, name="C"))
        >>> sch.reverse_compute_inline("C")
        >>> print(sch)
        for i in range(8):
            C[i] = (A[i] + 1.0) * 2.0
        """
        name = self._block(block, "reverse_compute_inline")
        self._apply(blocks.reverse_compute_inline(self._state, name), "reverse_compute_inline",
                    (BlockHandle(name),), {})

    def cache_read(self, block: BlockHandle | str, buffer: str, scope: str) -> BlockHandle:
        """Copy ``buffer`` into a new buffer of ``scope`` ("global", "shared", "local") that the
        block reads instead; returns the copy block (move it with compute_at).

        >>> import polyloop as pl
        >>> A = pl.placeholder((4, 6), "float32", name="A")
        >>> k = pl.reduce_axis((0, 6), name="k")
        >>> sch = pl.Schedule(pl.compute((4,), lambda i: pl.sum(A[i, k], axis=k), name="S"))
        >>> sch.cache_read("S", "A", "local")
        Block('A_local')
        >>> print(sch)
        for ax0 in range(4):
            for ax1 in range(6):
                A_local[ax0, ax1] = A[ax0, ax1]
        for i in range(4):
            S[i] = 0.0
        for i in range(4):
            for k in range(6):
                S[i] += A_local[i, k]
        """
        name = self._block(block, "cache_read")
        new, copy = rewrites.cache_read(self._state, name, self._buffer(buffer, "cache_read"),
                                          scope)
        h = BlockHandle(copy)
        self._apply(new, "cache_read", (BlockHandle(name), buffer, scope), {}, (h,))
        return h

    def cache_write(self, block: BlockHandle | str, scope: str) -> BlockHandle:
        """Let the block write a new buffer of ``scope``, copied back afterwards; returns the
        copy-back block (move it with reverse_compute_at).

        >>> import polyloop as pl
        >>> A = pl.placeholder((4, 6), "float32", name="A")
        >>> k = pl.reduce_axis((0, 6), name="k")
        >>> sch = pl.Schedule(pl.compute((4,), lambda i: pl.sum(A[i, k], axis=k), name="S"))
        >>> sch.cache_write("S", "local")
        Block('S_local_out')
        >>> print(sch)
        for i in range(4):
            S_local[i] = 0.0
        for i in range(4):
            for k in range(6):
                S_local[i] += A[i, k]
        for ax0 in range(4):
            S[ax0] = S_local[ax0]
        """
        name = self._block(block, "cache_write")
        new, copy = rewrites.cache_write(self._state, name, scope)
        h = BlockHandle(copy)
        self._apply(new, "cache_write", (BlockHandle(name), scope), {}, (h,))
        return h

    def rfactor(self, loop: LoopHandle, factor_axis: int = 0) -> BlockHandle:
        """Turn the reduction over ``loop`` into partial results indexed by the loop (which can
        then run in parallel or vectorized) followed by a final reduction; returns the
        partial-result block.

        >>> import polyloop as pl
        >>> A = pl.placeholder((4, 6), "float32", name="A")
        >>> k = pl.reduce_axis((0, 6), name="k")
        >>> sch = pl.Schedule(pl.compute((4,), lambda i: pl.sum(A[i, k], axis=k), name="S"))
        >>> i, k = sch.get_loops("S")
        >>> ko, ki = sch.split(k, factors=[None, 2])
        >>> sch.rfactor(ki)
        Block('S_rf')
        >>> print(sch)
        for i in range(4):
            S[i] = 0.0
        for i in range(4):
            for r in range(2):
                S_rf[r, i] = 0.0
        for i in range(4):
            for k_0 in range(3):
                for k_1 in range(2):
                    S_rf[k_1, i] += A[i, 2 * k_0 + k_1]
        for i in range(4):
            for r in range(2):
                S[i] += S_rf[r, i]
        """
        node = self._loop(loop, "rfactor")
        arg.integer("rfactor", "factor_axis", factor_axis, minimum=0)
        new, rf = rewrites.rfactor(self._state, node, factor_axis)
        h = BlockHandle(rf)
        self._apply(new, "rfactor", (loop,), {"factor_axis": factor_axis}, (h,))
        return h

    def transform_layout(self, block: BlockHandle | str, buffer: str,
                         index_map: Callable[..., Any]) -> None:
        """Store ``buffer`` in a new layout: ``lambda k, j: (j // 16, k, j % 16)`` packs B into
        16-wide column panels. Arguments keep their layout outside the kernel (a packed copy is
        made); the map must be one-to-one.

        >>> import polyloop as pl
        >>> A = pl.placeholder((4, 6), "float32", name="A")
        >>> sch = pl.Schedule(pl.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B"))
        >>> sch.transform_layout("B", "B", lambda i, j: (j, i))
        >>> print(sch)
        for i in range(4):
            for j in range(6):
                B_packed[j, i] = A[i, j] + 1.0
        for ax0 in range(4):
            for ax1 in range(6):
                B[ax0, ax1] = B_packed[ax1, ax0]
        """
        self._block(block, "transform_layout")
        buf = self._buffer(buffer, "transform_layout")
        if not callable(index_map):
            raise ScheduleError(f"transform_layout: the index map must be a function of the "
                                f"indices of '{buf}', like lambda i, j: (j, i); got "
                                f"{index_map!r:.60}")
        new, _ = rewrites.transform_layout(self._state, buf, index_map)
        text = _lambda_text(index_map, self.program.buffer(buf).ndim)
        self._apply(new, "transform_layout", (block if isinstance(block, BlockHandle)
                                              else BlockHandle(block), buf, {"lambda": text}), {})

    def tensorize(self, loop: LoopHandle, intrin: tz.TensorIntrin | str) -> None:
        """Replace the loop nest under ``loop`` by a call of ``intrin`` (a ``pl.TensorIntrin``,
        or the name of one already created), after checking that the nest computes exactly the
        intrinsic's description. Where the problem size leaves a partial tile, the generated
        code tests each tile: full tiles call the intrinsic, partial ones run the loops. C
        target only. See ``polyloop.intrin.gemm_intrin`` for built-in micro-kernels.

        >>> import polyloop as pl
        >>> from polyloop.intrin import dot_intrin
        >>> A = pl.placeholder((4, 8), "float32", name="A")
        >>> x = pl.placeholder((8,), "float32", name="x")
        >>> k = pl.reduce_axis((0, 8), name="k")
        >>> sch = pl.Schedule(pl.compute((4,), lambda i: pl.sum(A[i, k] * x[k], axis=k), name="y"))
        >>> sch.tensorize(sch.get_loops("y")[1], dot_intrin("portable"))
        >>> print(sch)
        for i in range(4):
            y[i] = 0.0
        for i in range(4):
            for k in range(8):  # tensorize=pl_ukr_dot_portable ...
                y[i] += A[i, k] * x[k]
        """
        node = self._loop(loop, "tensorize")
        it = tz.lookup(intrin)
        self._apply(tz.tensorize(self._state, node, it), "tensorize",
                    (loop, {"intrin": it.name}), {})

    def _buffer(self, buffer: object, primitive: str) -> str:
        name = getattr(buffer, "name", buffer)
        if not isinstance(name, str) or not self.program.has_buffer(name):
            raise ScheduleError(f"{primitive}: no buffer {buffer!r}; buffers: "
                                + ", ".join(b.name for b in self.program.buffers))
        return name
