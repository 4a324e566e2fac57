# SPDX-License-Identifier: Apache-2.0
"""Lowering for GPU-style targets (OpenCL): a scheduled program -> a sequence of launches.

Each top-level loop nest is one launch (a kernel enqueued after the previous one finished, so
any dependence between nests is respected). Inside a launch, loops bound to ``blockIdx.*``
(tags ``g.N``) enumerate work-groups and enclose everything (``poly.launch``); loops bound to
``threadIdx.*`` (``l.N``) are the work-items of a group. Work-group barriers are placed where
exact dependences link different work-items (``poly.gpu.barrier_gaps``); statements outside a
work-item loop of an axis the launch uses run on work-item 0 of that axis only. Temporaries
used by several launches live in global scratch memory the host allocates.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import count
from typing import Callable, Mapping

from ..errors import BuildError
from ..ir.dtypes import DType
from ..ir.expr import Const, Expr, free_vars, loads
from ..ir.loops import (Barrier, Block, Call, For, If, Kernel, LoopKind, Node, Store, iter_nodes,
                        map_children)
from ..ir.printer import loops_to_str
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.thread_axis import AxisLevel, ThreadAxis
from ..poly import gpu, launch
from ..poly.hardware_ids import HARDWARE_ID, HardwareLoop
from ..poly.isl_text import iterator_expr
from ..poly.tree import LoopNode, Root, StmtNode, loops, path_to, statements_under
from ..schedule.intrin_registry import lookup
from .barriers import merge_adjacent
from .lower import Step, lower, run_steps
from .storage import place_temporaries

BARRIER_BUFFER = "__barrier"
# the annotation of a work-group or work-item loop whose values are the launched ids (plus its
# start): its id needs no guard
EXACT_GRID = HARDWARE_ID
# the annotation of the ``threadIdx.x`` loop of one iteration around a call of a warp-collective
# tensor intrinsic: the program means lane 0 runs the call; CUDA runs it on the 32 lanes
WARP_LANES = ("warp_lanes", "the call runs on the 32 lanes of the warp")
AXES = gpu.AXES


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel enqueue: the kernel, work-groups per axis (x, y, z; expressions of the size
    parameters) and work-items per group per axis."""
    kernel: Kernel
    groups: tuple[Expr, Expr, Expr]
    items: tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class DeviceProgram:
    """Everything a GPU-style target generates and runs: the arguments, size parameters,
    scratch buffers (global temporaries) and the launches, in order."""
    name: str
    args: tuple[Buffer, ...]
    params: tuple[str, ...]
    scratch: tuple[Buffer, ...]
    launches: tuple[Launch, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LaunchPart:
    """One launch while it is lowered: its statements' program and loop tree, its grid once
    known, the loops the hardware runs, the notes, and the kernel once built."""
    name: str
    program: Program
    tree: Root
    groups: tuple[Expr, Expr, Expr] | None = None
    items: tuple[int, int, int] | None = None
    notes: tuple[str, ...] = ()
    hardware: Mapping[int, HardwareLoop] | None = None
    kernel: Kernel | None = None

    def text(self) -> str:
        grid = "" if self.groups is None else (f"  groups {tuple(map(str, self.groups))} "
                                               f"items {self.items}")
        body = str(self.program) if self.kernel is None else loops_to_str(self.kernel.body)
        return f"# launch {self.name}{grid}\n{body}"


@dataclass(frozen=True, slots=True)
class DeviceLowering:
    """What the steps of ``lower_device`` pass on: the program, then one part per launch."""
    program: Program
    root: Root
    name: str
    parts: tuple[LaunchPart, ...] = ()

    def text(self) -> str:
        """The program before it is cut into launches, the launches after."""
        return str(self.program) if not self.parts else "\n".join(p.text() for p in self.parts)


def _each(fn: Callable[[LaunchPart], LaunchPart]) -> Callable[[DeviceLowering], DeviceLowering]:
    return lambda s: replace(s, parts=tuple(fn(p) for p in s.parts))


def lower_device(program: Program, root: Root, *, name: str | None = None) -> DeviceProgram:
    """The launches that run ``program`` in the order of the loop tree ``root``, made by
    ``DEVICE_STEPS`` (each launch's kernel by ``lower``'s own steps).

    >>> import polyloop as pl
    >>> from polyloop.schedule.kernel import schedule_of
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]", name="twice")
    >>> knl = pl.split_iname(knl, "i", 64, outer_tag="g.0", inner_tag="l.0")
    >>> sch = schedule_of(knl)
    >>> device = lower_device(sch.program, sch.state.root)
    >>> [(x.kernel.name, x.items) for x in device.launches]
    [('twice', (64, 1, 1))]
    >>> [step.name for step in DEVICE_STEPS][:3]
    ['global temporaries', 'split launches', 'launch sizes']
    """
    done = run_steps(DeviceLowering(program, root, name or program.name), DEVICE_STEPS)
    scratch: dict[str, Buffer] = {}
    notes: list[str] = []
    launches = []
    for part in done.parts:
        kernel = part.kernel
        assert kernel is not None and part.groups is not None and part.items is not None
        for b in kernel.args:
            if b.role is BufferRole.TEMP:
                scratch.setdefault(b.name, b)
        notes += [x for x in kernel.notes if x not in notes]
        launches.append(Launch(kernel, part.groups, part.items))
    return DeviceProgram(launches[0].kernel.name if len(launches) == 1 else done.name,
                         tuple(done.program.arg_buffers()), done.program.params,
                         tuple(scratch.values()), tuple(launches), tuple(notes))


def _shared_temps_to_global(program: Program, root: Root) -> Program:
    """A temporary used by two launches cannot live in local or private memory."""
    users: dict[str, set[int]] = {}
    for k, top in enumerate(root.children):
        for s in statements_under(top):
            st = program.statement(s)
            for b in {st.buffer} | {ld.buffer for ld in st.reads()}:
                users.setdefault(b, set()).add(k)
    buffers = tuple(replace(b, scope=MemScope.GLOBAL)
                    if b.role is BufferRole.TEMP and len(users.get(b.name, ())) > 1 else b
                    for b in program.buffers)
    return program.replace(buffers=buffers)


def _parts(program: Program, root: Root, base: str) -> tuple[LaunchPart, ...]:
    """One launch per top-level node of ``root``, with the statements and buffers it uses."""
    out = []
    for k, top in enumerate(root.children):
        names = set(statements_under(top)) if isinstance(top, LoopNode) else {top.statement}
        stmts = tuple(s for s in program.statements if s.name in names)
        used = {s.buffer for s in stmts} | {ld.buffer for s in stmts for ld in s.reads()}
        sub = program.replace(statements=stmts, nesting=(), buffers=tuple(
            b for b in program.buffers if b.role is not BufferRole.TEMP or b.name in used))
        out.append(LaunchPart(base if len(root.children) == 1 else f"{base}_{k}", sub,
                              Root((top,))))
    return tuple(out)


def _launch_temporaries(p: LaunchPart) -> LaunchPart:
    program, _, notes = place_temporaries(p.program, p.tree, size_global=False)
    return replace(p, program=program, notes=tuple(notes))


def _barriers(p: LaunchPart) -> LaunchPart:
    tree, program = _with_barriers(p.program, p.tree)
    return replace(p, program=program, tree=tree)


def _lower_launch(p: LaunchPart) -> LaunchPart:
    kernel = lower(p.program, p.tree, name=p.name, compact=False, hardware=p.hardware,
                   gpu=True)
    if p.hardware and not _barriers_uniform(kernel.body):
        kernel = lower(p.program, p.tree, name=p.name, compact=False, gpu=True)
    return replace(p, kernel=kernel)


def _finish_launch(p: LaunchPart) -> LaunchPart:
    """Barriers, single work-item statements and exact grids in the body (``_finish``); the
    global temporaries the body uses become arguments (scratch the host allocates)."""
    kernel = p.kernel
    assert kernel is not None and p.groups is not None and p.items is not None
    body = merge_adjacent(_finish(p.program, p.tree, kernel.body, p.items, p.groups))
    scratch = tuple(b for b in kernel.temps if b.scope is MemScope.GLOBAL
                    and b.name != BARRIER_BUFFER and _uses(kernel.body, b.name))
    temps = tuple(b for b in kernel.temps if b.scope is not MemScope.GLOBAL)
    return replace(p, kernel=Kernel(kernel.name, kernel.args + scratch, kernel.params, temps,
                                    body, p.notes))


def _sizes(program: Program, top: LoopNode | StmtNode) -> dict[str, tuple]:
    """The launch's ``groups`` (work-groups per axis) and ``items`` (work-items per group)."""
    groups: dict[int, Expr] = {}
    items: dict[int, int] = {}
    if isinstance(top, LoopNode):
        # every primitive refuses these shapes; a tree made another way is refused here
        problem = launch.shape_problem(program, Root((top,)))
        if problem is not None:
            raise BuildError(problem.describe())
        for n in _all_loops(top):
            if gpu.is_group(n):
                groups[n.thread.dim] = launch.group_count(program, n)  # type: ignore[union-attr]
            elif gpu.is_item(n):
                axis = n.thread.dim  # type: ignore[union-attr]
                items[axis] = max(items.get(axis, 1), launch.item_count(program, n))
    one = Const(1, DType.INT64, True)
    return {"groups": tuple(groups.get(d, one) for d in range(len(AXES))),
            "items": tuple(items.get(d, 1) for d in range(len(AXES)))}


def _hardware_loops(program: Program, tree: Root, groups: tuple[Expr, ...],
                    items: tuple[int, ...]) -> dict[int, HardwareLoop]:
    """The work-group and work-item loops of a launch that isl need not generate: each runs
    ``start + id`` for the ids the launch has on its axis (every value of the loop among
    them). A work-group loop whose values the grid does not cover from a constant start is
    left to isl."""
    out: dict[int, HardwareLoop] = {}
    for n in loops(tree):
        if not (gpu.is_group(n) or gpu.is_item(n)):
            continue
        axis = n.thread.dim  # type: ignore[union-attr]
        start = launch.loop_start(program, n)
        if start is None:
            continue
        if gpu.is_item(n):
            out[n.id] = HardwareLoop(start, Const(items[axis], DType.INT64, True))
        elif launch.covers(program, n, start, groups[axis]):
            out[n.id] = HardwareLoop(start, groups[axis])
    return out


def _barriers_uniform(body: Node) -> bool:
    """Does every work-item of a group reach the same barriers (no condition or loop bound on
    a work-item index above one)? isl could, in principle, write the bounds of a loop that
    holds a barrier with the work-item parameters; the caller then lets isl build the
    work-item loops instead."""
    def go(n: Node, items: frozenset[str], divergent: bool) -> bool:
        if isinstance(n, Store):
            return not (divergent and n.buffer == BARRIER_BUFFER)
        if isinstance(n, Barrier):      # an explicit one, written by the user
            return not divergent
        if isinstance(n, For):
            if n.thread is not None and n.thread.is_item:
                items = items | {n.var}
            else:
                divergent = divergent or bool((free_vars(n.start) | free_vars(n.stop)) & items)
        elif isinstance(n, If):
            divergent = divergent or bool(free_vars(n.cond) & items)
        return all(go(c, items, divergent) for c in _children(n))
    return go(body, frozenset(), False)


def _children(n: Node) -> tuple[Node, ...]:
    if isinstance(n, For):
        return (n.body,)
    if isinstance(n, If):
        return (n.then,) if n.otherwise is None else (n.then, n.otherwise)
    return n.body if isinstance(n, Block) else ()


def _all_loops(n: LoopNode):
    yield n
    for c in n.children:
        if isinstance(c, LoopNode):
            yield from _all_loops(c)


def _with_barriers(program: Program, tree: Root) -> tuple[Root, Program]:
    gaps = gpu.barrier_gaps(program, tree)
    if not gaps:
        return tree, program
    program = program.replace(buffers=program.buffers + (
        Buffer(BARRIER_BUFFER, (), DType.BOOL, BufferRole.TEMP),))
    # insert from the last gap of each loop backwards so that earlier indices stay valid
    for k, gap in sorted(enumerate(gaps), key=lambda t: (t[1].loop or -1, -t[1].index)):
        assert gap.loop is not None, "a launch has one top-level nest"
        path = path_to(tree, gap.loop)
        assert path is not None
        name = f"{BARRIER_BUFFER}_{'g' if gap.global_memory else 'l'}{k}"
        dom, iters = gpu.barrier_domain(program, path, name)
        program = program.replace(statements=program.statements + (Statement(
            name, iters, dom, BARRIER_BUFFER, (), Const(True, DType.BOOL)),))
        tree = _insert(tree, path, name, iters, gap.index)
    return tree, program


def _insert(tree: Root, path: list[LoopNode], name: str, iters: tuple[str, ...],
            index: int) -> Root:
    ids = {n.id: k for k, n in enumerate(path)}

    def go(n):
        if not isinstance(n, LoopNode) or n.id not in ids:
            return n
        k = ids[n.id]
        exprs = n.exprs + ((name, iterator_expr(name, iters, f"t{k}")),)
        kids = tuple(go(c) for c in n.children)
        if n.id == path[-1].id:
            kids = kids[:index] + (StmtNode(name),) + kids[index:]
        return replace(n, exprs=exprs, children=kids)
    return Root(tuple(go(c) for c in tree.children))


def _finish(program: Program, tree: Root, body: Node, items: tuple[int, ...],
            groups: tuple[Expr, ...]) -> Node:
    """Barrier statements become Barrier nodes; a statement outside the work-item (or
    work-group) loops of an axis the launch spreads over (in the loop tree: the kernel body
    may declare every id at its top) runs on index 0 of that axis only; a work-group loop
    that covers the whole grid is marked ``EXACT_GRID`` (its id needs no guard)."""
    exact = {ThreadAxis.of(AxisLevel.GROUP, d): g for d, g in enumerate(groups)}
    wide = [ThreadAxis.of(AxisLevel.ITEM, d) for d, n in enumerate(items) if n > 1]
    wide += [ThreadAxis.of(AxisLevel.GROUP, d) for d, g in enumerate(groups)
             if not (isinstance(g, Const) and g.value == 1)]
    under = {s: frozenset(n.thread for n in path if n.thread)
             for s, path in gpu.statement_paths(tree).items()}
    fresh = count()

    def go(n: Node, bound: frozenset[str], owner: str = "") -> Node:
        if isinstance(n, (Store, Call)):
            if isinstance(n, Store) and n.buffer == BARRIER_BUFFER:
                return Barrier("global" if "__barrier_g" in n.statement else "local")
            out: Node = n
            # a copy to or from registers (lower.promote) has no statement: it runs where the
            # one statement of its block runs
            axes = under.get(n.statement or owner, bound)
            warp = isinstance(n, Call) and _warp_collective(n)
            for axis in reversed([a for a in wide if a not in axes]):
                lanes = warp and axis == ThreadAxis.of(AxisLevel.ITEM, 0)
                out = For(f"_single_{next(fresh)}", Const(0, DType.INT64, True),
                          Const(1, DType.INT64, True), out, LoopKind.THREAD, thread=axis,
                          annotations=(WARP_LANES,) if lanes else ())
            return out
        inner = bound | {n.thread} if isinstance(n, For) and n.thread else bound
        if isinstance(n, Block):
            named = {x.statement for x in iter_nodes(n)
                     if isinstance(x, (Store, Call)) and x.statement}
            owner = next(iter(named)) if len(named) == 1 else owner
        out = map_children(n, lambda c: go(c, inner, owner))
        if (isinstance(out, For) and EXACT_GRID not in out.annotations
                and _fills_grid(program, out, exact.get(out.thread) if out.thread else None)):
            out = replace(out, annotations=out.annotations + (EXACT_GRID,))
        return out
    return go(body, frozenset())


def _warp_collective(call: Call) -> bool:
    """Is ``call`` an intrinsic whose CUDA body the 32 lanes of a warp run together?"""
    body = lookup(call.function).devices.get("cuda")
    return body is not None and body.warp


def _fills_grid(program: Program, loop: For, count: Expr | None) -> bool:
    """A work-group loop from 0 whose bound is at least the number of work-groups launched on
    its axis: every work-group id is in range, so the id needs no guard."""
    return (count is not None and loop.step == 1 and isinstance(loop.start, Const)
            and loop.start.value == 0 and not free_vars(loop.stop) - set(program.params)
            and launch.at_least(program, loop.stop, count))


def _uses(body: Node, buffer: str) -> bool:
    for n in iter_nodes(body):
        if isinstance(n, Store) and (n.buffer == buffer or any(
                ld.buffer == buffer for e in (n.value, *n.indices) for ld in loads(e))):
            return True
    return False


# In order. The temporaries are compacted before the barriers are placed (reusing one box in
# every iteration is what creates the barriers' work) and the hardware loops are found before
# the barriers (they add no value to any loop, and the loops keep their ids).
DEVICE_STEPS: tuple[Step[DeviceLowering], ...] = (
    Step("global temporaries", lambda s: replace(
        s, program=_shared_temps_to_global(s.program, s.root))),
    Step("split launches", lambda s: replace(s, parts=_parts(s.program, s.root, s.name))),
    Step("launch sizes", _each(lambda p: replace(p, **_sizes(p.program, p.tree.children[0])))),
    Step("launch temporaries", _each(_launch_temporaries)),
    Step("hardware loops", _each(lambda p: replace(p, hardware=_hardware_loops(
        p.program, p.tree, p.groups, p.items)))),  # type: ignore[arg-type]
    Step("barriers", _each(_barriers)),
    Step("lower launches", _each(_lower_launch)),
    Step("finish launches", _each(_finish_launch)),
)
