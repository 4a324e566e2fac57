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

from ..errors import BuildError
from ..ir.dtypes import DType
from ..ir.expr import Const, Expr, free_vars, loads
from ..ir.loops import (Barrier, Block, For, If, Kernel, LoopKind, Node, Store, iter_nodes,
                        map_children)
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.thread_axis import AxisLevel, ThreadAxis
from ..poly import gpu, launch
from ..poly.astgen import HARDWARE_ID, HardwareLoop
from ..poly.tree import LoopNode, Root, StmtNode, loops, path_to, statements_under
from .lower import lower
from .storage import place_temporaries

BARRIER_BUFFER = "__barrier"
# the annotation of a work-group or work-item loop whose values are the launched ids (plus its
# start): its id needs no guard
EXACT_GRID = HARDWARE_ID
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


def lower_device(program: Program, root: Root, *, name: str | None = None) -> DeviceProgram:
    """The launches that run ``program`` in the order of the loop tree ``root``."""
    base = name or program.name
    program = _shared_temps_to_global(program, root)
    launches: list[Launch] = []
    scratch: dict[str, Buffer] = {}
    notes: list[str] = []
    for k, top in enumerate(root.children):
        kname = base if len(root.children) == 1 else f"{base}_{k}"
        launch = _launch(program, top, kname)
        for b in launch.kernel.args:
            if b.role is BufferRole.TEMP:
                scratch.setdefault(b.name, b)
        notes += [x for x in launch.kernel.notes if x not in notes]
        launches.append(launch)
    return DeviceProgram(launches[0].kernel.name if len(launches) == 1 else base,
                         tuple(program.arg_buffers()), program.params, tuple(scratch.values()),
                         tuple(launches), tuple(notes))


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


def _launch(program: Program, top: LoopNode | StmtNode, name: str) -> Launch:
    names = set(statements_under(top)) if isinstance(top, LoopNode) else {top.statement}
    stmts = tuple(s for s in program.statements if s.name in names)
    used = {s.buffer for s in stmts} | {ld.buffer for s in stmts for ld in s.reads()}
    sub = program.replace(statements=stmts, nesting=(), buffers=tuple(
        b for b in program.buffers if b.role is not BufferRole.TEMP or b.name in used))
    tree = Root((top,))
    groups, items = _sizes(sub, top)
    # compact first: reusing one box in every iteration is what creates the barriers' work
    sub, _, notes = place_temporaries(sub, tree, size_global=False)
    # before the barriers: they add no value to any loop, and the loops keep their ids
    hardware = _hardware_loops(sub, tree, groups, items)
    tree, sub = _with_barriers(sub, tree)
    kernel = lower(sub, tree, name=name, compact=False, hardware=hardware)
    if hardware and not _barriers_uniform(kernel.body):
        kernel = lower(sub, tree, name=name, compact=False)
    body = _finish(sub, tree, kernel.body, items, groups)
    scratch = tuple(b for b in kernel.temps if b.scope is MemScope.GLOBAL
                    and b.name != BARRIER_BUFFER and _uses(kernel.body, b.name))
    temps = tuple(b for b in kernel.temps if b.scope is not MemScope.GLOBAL)
    kernel = Kernel(kernel.name, kernel.args + scratch, kernel.params, temps, body, notes)
    return Launch(kernel, groups, items)


def _sizes(program: Program, top: LoopNode | StmtNode) -> tuple[tuple[Expr, Expr, Expr],
                                                                 tuple[int, int, int]]:
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
    return (tuple(groups.get(d, one) for d in range(len(AXES))),  # type: ignore[return-value]
            tuple(items.get(d, 1) for d in range(len(AXES))))  # type: ignore[return-value]


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
    head = f"{name}[{', '.join(iters)}]"

    def go(n):
        if not isinstance(n, LoopNode) or n.id not in ids:
            return n
        k = ids[n.id]
        exprs = n.exprs + ((name, f"{{ {head} -> [(t{k})] }}"),)
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

    def go(n: Node, bound: frozenset[str]) -> Node:
        if isinstance(n, Store):
            if n.buffer == BARRIER_BUFFER:
                return Barrier("global" if "__barrier_g" in n.statement else "local")
            out: Node = n
            axes = under.get(n.statement, bound)
            for axis in reversed([a for a in wide if a not in axes]):
                out = For(f"_single_{next(fresh)}", Const(0, DType.INT64, True),
                          Const(1, DType.INT64, True), out, LoopKind.THREAD, thread=axis)
            return out
        inner = bound | {n.thread} if isinstance(n, For) and n.thread else bound
        out = map_children(n, lambda c: go(c, inner))
        if (isinstance(out, For) and EXACT_GRID not in out.annotations
                and _fills_grid(program, out, exact.get(out.thread) if out.thread else None)):
            out = replace(out, annotations=out.annotations + (EXACT_GRID,))
        return out
    return go(body, frozenset())


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
