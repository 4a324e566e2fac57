# SPDX-License-Identifier: Apache-2.0
"""``pl.Schedule``: explicit control of how a program runs, every step proven legal.

>>> import polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n,), "float32", name="A")
>>> B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
>>> sch = pl.Schedule(B)
>>> i0, i1 = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 8])
>>> sch.vectorize(i1)
>>> print(sch)   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..errors import PolyloopError, ScheduleError
from ..ir.loops import LoopKind
from ..ir.printer import loops_to_str
from ..ir.program import Program
from ..poly.astgen import build_ast
from ..poly.tree import LoopNode
from ..util.highlight import to_html
from . import blocks, hints, loops, rewrites, state as st
from . import fusion
from . import tensorize as tz
from .trace import BlockHandle, LoopHandle, Step, Trace, decode, encode

THREAD_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread")


def _lambda_text(fn: Callable[..., Any], ndim: int) -> str:
    """Replayable text of an index map: call it on named variables and print the result."""
    from ..ir.expr import Var, as_expr
    names = [f"x{k}" for k in range(ndim)]
    out = fn(*[Var(n) for n in names])
    out = out if isinstance(out, (tuple, list)) else (out,)
    return f"lambda {', '.join(names)}: ({', '.join(str(as_expr(e)) for e in out)},)"


def _with_hint(e: ScheduleError, hint: str) -> ScheduleError:
    text = str(e)
    return ScheduleError(text + ("" if text.endswith(".") else ".") + hint + ".")


def _broken(e: ScheduleError) -> bool:
    """Was the primitive refused for a dependence (not for a wrong argument)?"""
    return " would break " in str(e) or " would make " in str(e)


def _call_text(primitive: str, args: tuple, kwargs: dict[str, Any]) -> str:
    """``reorder(j, i)``: the call as the user wrote it, for error messages."""
    def one(v: Any) -> str:
        if isinstance(v, (LoopHandle, BlockHandle)):
            return v.name
        return repr(v)
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return f"{primitive}({', '.join(parts)})"


class Schedule:
    """A program plus the order its statement instances run in.

    Every primitive either returns with the schedule changed and the change recorded in
    ``trace``, or raises ``ScheduleError`` and leaves the schedule as it was. Dependences are
    exact (isl); declared reductions may be reordered (floating-point sums may round
    differently) but never run in parallel without ``rfactor``.
    """

    def __init__(self, *outputs: Any, args: Sequence[Any] | None = None,
                 name: str | None = None):
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

    # ---------------------------------------------------------------------------------------
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
        st.verify(new, _call_text(primitive, args, kwargs))
        self._state = new
        self._record(primitive, args, kwargs, results)

    def _loop(self, loop: LoopHandle, primitive: str) -> LoopNode:
        if not isinstance(loop, LoopHandle):
            raise ScheduleError(f"{primitive}: expected a loop from get_loops/split/..., got "
                                f"{loop!r}")
        node = self._state.loop(loop.id)
        if node is None:
            raise ScheduleError(f"{primitive}: loop '{loop.name}' is no longer in the schedule "
                                "(a primitive replaced it, e.g. split or fuse); use the loops "
                                "that primitive returned")
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
        """The block computing tensor ``name``: ``sch.get_block("C")``."""
        self._block(name, "get_block")
        return BlockHandle(name)

    def blocks(self) -> list[BlockHandle]:
        """All blocks, in program order."""
        return [BlockHandle(n) for n in dict.fromkeys(s.block_name for s in self.program.statements)]

    def get_loops(self, block: BlockHandle | str) -> list[LoopHandle]:
        """The loops around the block's main statement, outermost first."""
        name = self._block(block, "get_loops")
        main = blocks.main_statement(self._state, name)
        result = [self._handle(n) for n in self._state.stmt_path(main.name)]
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
        """Blocks whose results this block reads."""
        return self._neighbours(block, True)

    def get_consumers(self, block: BlockHandle | str) -> list[BlockHandle]:
        """Blocks that read this block's results."""
        return self._neighbours(block, False)

    # loop primitives ---------------------------------------------------------------------------
    def split(self, loop: LoopHandle, factors: Sequence[int | None], *,
              names: Sequence[str] | None = None) -> list[LoopHandle]:
        """Split a loop into nested loops of the given trip counts (one may be None: inferred).

        Extents that do not divide and symbolic extents are exact: isl writes the bounds.
        """
        node = self._loop(loop, "split")
        new, nodes = loops.split(self._state, node, list(factors), names)
        result = [self._handle(n) for n in nodes]
        kw = {"factors": list(factors)} | ({"names": list(names)} if names else {})
        self._apply(new, "split", (loop,), kw, tuple(result))
        return result

    def reorder(self, *loops_: LoopHandle) -> None:
        """Put perfectly nested loops in the given order (refused if a dependence would break)."""
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
        """2-D tiling: split both loops and reorder to (a0, b0, a1, b1)."""
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
        """Fuse directly nested loops (outermost first) into one loop."""
        nodes = [self._loop(x, "fuse") for x in loops_]
        new, fused = loops.fuse(self._state, nodes, name)
        h = self._handle(fused)
        self._apply(new, "fuse", tuple(loops_), {"name": name} if name else {}, (h,))
        return h

    def skew(self, outer: LoopHandle, inner: LoopHandle, factor: int = 1) -> None:
        """``inner += factor * outer``: the wavefront transformation that can make inner loops
        parallel (seed 002)."""
        o, i = self._loop(outer, "skew"), self._loop(inner, "skew")
        self._apply(loops.skew(self._state, o, i, factor), "skew", (outer, inner),
                    {"factor": factor})

    def reverse(self, loop: LoopHandle) -> None:
        """Run a loop backwards."""
        node = self._loop(loop, "reverse")
        self._apply(loops.reverse(self._state, node), "reverse", (loop,), {})

    def shift(self, loop: LoopHandle, offset: int | str) -> None:
        """Run a loop's iterations at ``value + offset`` for every statement below it (an int, or
        an affine expression of size parameters such as ``"K - 1"``): lines nests up for
        ``merge``."""
        node = self._loop(loop, "shift")
        self._apply(fusion.shift(self._state, node, offset), "shift", (loop, offset), {})

    def merge(self, first: LoopHandle, second: LoopHandle) -> LoopHandle:
        """Fuse two adjacent sibling loops into one that runs ``first``'s body, then
        ``second``'s, at each value (classic loop fusion; ``fuse`` collapses nested loops).
        Refused if a dependence would break: ``shift`` the second loop first to line them up."""
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
        bad = st.check_parallel(new, new.loop(node.id))  # type: ignore[arg-type]
        if bad is not None:
            hint = ""
            if bad.dependence.reduction:
                hint = " It is a reduction loop: split it and use rfactor, or choose a spatial loop."
            raise ScheduleError(f"cannot {primitive} loop '{node.name}': it carries "
                                f"{bad.summary()}; for instance {bad.describe()}.{hint}")
        return new  # type: ignore[return-value]

    def parallel(self, loop: LoopHandle) -> None:
        """Run the iterations of a loop on all cores (OpenMP). Refused if it carries a dependence."""
        node = self._loop(loop, "parallelize")
        for anc in self._state.path(node.id)[:-1]:
            if anc.kind is LoopKind.PARALLEL:
                raise ScheduleError(f"cannot parallelize loop '{node.name}': it is inside "
                                    f"parallel loop '{anc.name}'; fuse them instead")
        new = self._exclusive(loop, "parallelize", LoopKind.PARALLEL)
        self._apply(new, "parallel", (loop,), {})  # type: ignore[arg-type]

    def vectorize(self, loop: LoopHandle) -> None:
        """Run an innermost loop with SIMD instructions. Refused if it carries a dependence."""
        node = self._loop(loop, "vectorize")
        inner = st.inner_loops(self._state, node)
        if inner:
            raise ScheduleError(f"cannot vectorize loop '{node.name}': it contains loop "
                                f"'{inner[0].name}'; vectorize an innermost loop")
        new = self._exclusive(loop, "vectorize", LoopKind.VECTORIZED)
        self._apply(new, "vectorize", (loop,), {})  # type: ignore[arg-type]

    def unroll(self, loop: LoopHandle, factor: int | None = None) -> None:
        """Unroll a loop fully (``factor=None``) or by ``factor``."""
        node = self._loop(loop, "unroll")
        if factor is not None and (not isinstance(factor, int) or factor < 1):
            raise ScheduleError(f"unroll factor must be a positive integer, got {factor!r}")
        new = loops.set_kind(self._state, node, LoopKind.UNROLLED, unroll_factor=factor)
        self._apply(new, "unroll", (loop,), {"factor": factor} if factor else {})

    def bind(self, loop: LoopHandle, thread_axis: str) -> None:
        """Map a loop onto a GPU index (``"blockIdx.x"``, ``"threadIdx.y"``, ...)."""
        if thread_axis not in THREAD_AXES:
            raise ScheduleError(f"unknown thread axis {thread_axis!r}; valid: "
                                + ", ".join(THREAD_AXES))
        new = self._exclusive(loop, "bind", LoopKind.THREAD, thread=thread_axis)
        self._apply(new, "bind", (loop, thread_axis), {})  # type: ignore[arg-type]

    def annotate(self, loop: LoopHandle, key: str, value: Any) -> None:
        """Attach a key/value annotation to a loop (printed as a comment; read by targets)."""
        node = self._loop(loop, "annotate")
        ann = tuple((k, v) for k, v in node.annotations if k != key) + ((str(key), str(value)),)
        new = loops.set_kind(self._state, node, node.kind, annotations=ann)
        self._apply(new, "annotate", (loop, key, value), {})

    # block primitives --------------------------------------------------------------------------
    def compute_at(self, block: BlockHandle | str, loop: LoopHandle) -> None:
        """Compute a producer inside a consumer's loop: each instance runs in the first iteration
        that needs it (exact footprints, e.g. a convolution's halo)."""
        name, node = self._block(block, "compute_at"), self._loop(loop, "compute_at")
        try:
            self._apply(blocks.compute_at(self._state, name, node), "compute_at",
                        (BlockHandle(name), loop), {})
        except ScheduleError as e:
            if not _broken(e):
                raise
            raise _with_hint(e, hints.compute_at_hint(self._state, name, node,
                                                      reverse=False)) from None

    def reverse_compute_at(self, block: BlockHandle | str, loop: LoopHandle) -> None:
        """Compute a consumer inside a producer's loop, right after what it reads is ready."""
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
        returns the initialization block (``C_init``), whose loops can then be vectorized."""
        name, node = self._block(block, "decompose_reduction"), self._loop(loop, "decompose_reduction")
        new = blocks.decompose_reduction(self._state, name, node)
        init = BlockHandle(next(s.name for s in blocks.block_statements(new, name) if s.is_init))
        self._apply(new, "decompose_reduction", (BlockHandle(name), loop), {}, (init,))
        return init

    def compute_inline(self, block: BlockHandle | str) -> None:
        """Substitute an elementwise block into its consumers; its buffer disappears."""
        name = self._block(block, "compute_inline")
        self._apply(blocks.compute_inline(self._state, name), "compute_inline",
                    (BlockHandle(name),), {})

    def reverse_compute_inline(self, block: BlockHandle | str) -> None:
        """Substitute an elementwise consumer into its (only) producer."""
        name = self._block(block, "reverse_compute_inline")
        self._apply(blocks.reverse_compute_inline(self._state, name), "reverse_compute_inline",
                    (BlockHandle(name),), {})

    def cache_read(self, block: BlockHandle | str, buffer: str, scope: str) -> BlockHandle:
        """Copy ``buffer`` into a new buffer of ``scope`` ("global", "shared", "local") that the
        block reads instead; returns the copy block (move it with compute_at)."""
        name = self._block(block, "cache_read")
        new, copy = rewrites.cache_read(self._state, name, self._buffer(buffer, "cache_read"),
                                          scope)
        h = BlockHandle(copy)
        self._apply(new, "cache_read", (BlockHandle(name), buffer, scope), {}, (h,))
        return h

    def cache_write(self, block: BlockHandle | str, scope: str) -> BlockHandle:
        """Let the block write a new buffer of ``scope``, copied back afterwards; returns the
        copy-back block (move it with reverse_compute_at)."""
        name = self._block(block, "cache_write")
        new, copy = rewrites.cache_write(self._state, name, scope)
        h = BlockHandle(copy)
        self._apply(new, "cache_write", (BlockHandle(name), scope), {}, (h,))
        return h

    def rfactor(self, loop: LoopHandle, factor_axis: int = 0) -> BlockHandle:
        """Turn the reduction over ``loop`` into partial results indexed by the loop (which can
        then run in parallel or vectorized) followed by a final reduction; returns the
        partial-result block."""
        node = self._loop(loop, "rfactor")
        new, rf = rewrites.rfactor(self._state, node, factor_axis)
        h = BlockHandle(rf)
        self._apply(new, "rfactor", (loop,), {"factor_axis": factor_axis}, (h,))
        return h

    def transform_layout(self, block: BlockHandle | str, buffer: str,
                         index_map: Callable[..., Any]) -> None:
        """Store ``buffer`` in a new layout: ``lambda k, j: (j // 16, k, j % 16)`` packs B into
        16-wide column panels. Arguments keep their layout outside the kernel (a packed copy is
        made); the map must be one-to-one."""
        self._block(block, "transform_layout")
        buf = self._buffer(buffer, "transform_layout")
        new, _ = rewrites.transform_layout(self._state, buf, index_map)
        text = _lambda_text(index_map, self.program.buffer(buf).ndim)
        self._apply(new, "transform_layout", (block if isinstance(block, BlockHandle)
                                              else BlockHandle(block), buf, {"lambda": text}), {})

    def tensorize(self, loop: LoopHandle, intrin: tz.TensorIntrin | str) -> None:
        """Replace the loop nest under ``loop`` by a call of ``intrin`` (a ``pl.TensorIntrin``,
        or the name of one already created), after checking that the nest computes exactly the
        intrinsic's description. Where the problem size leaves a partial tile, the generated
        code tests each tile: full tiles call the intrinsic, partial ones run the loops. C
        target only. See ``polyloop.intrin.gemm_intrin`` for built-in micro-kernels."""
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

    # output --------------------------------------------------------------------------------------
    def loop_ast(self):
        """The scheduled loop nest (isl's AST converted to polyloop's loop AST)."""
        return build_ast(self.program, self._state.root)

    def show(self, *, affine: bool = False) -> str:
        """The scheduled program as Python-like loops; with ``affine=True`` also each
        statement's schedule as an isl map."""
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
        other = Schedule.__new__(Schedule)
        other._state, other._origin, other.trace = self._state, self._origin, self.trace
        return other

    @staticmethod
    def from_trace(program: Any, trace: Trace | str) -> Schedule:
        """Replay a trace (or its JSON) on a program: ``pl.Schedule.from_trace(prog, t)``."""
        t = Trace.from_json(trace) if isinstance(trace, str) else trace
        if isinstance(program, (list, tuple)):
            sch = Schedule(*program)
        else:
            sch = Schedule(program)
        for step in t:
            fn: Callable[..., Any] | None = getattr(sch, step.primitive, None)
            if fn is None:
                raise PolyloopError(f"unknown primitive {step.primitive!r} in trace")
            fn(*[decode(a) for a in step.args], **{k: decode(v) for k, v in step.kwargs})
        return sch
