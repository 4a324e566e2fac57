# SPDX-License-Identifier: Apache-2.0
"""How a kernel's statements become a Program: assignment conversions, the loop nest the
instructions spell (``Program.nesting``), private temporaries, and which arrays are inputs,
outputs or updated in place. Reductions start from ``ir.expr.reduce_identity``."""
from __future__ import annotations

from typing import Mapping, Sequence

from ..ir.dtypes import DType
from ..ir.expr import Const, Expr, Load, Var, cast, free_vars, loads, rewrite, same
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.simplify import simplify
from ..poly.dataflow import reads_initial_values
from ..poly.gpu import statement_paths
from ..poly.launch import loop_extent
from ..poly.order import original_tree
from ..poly.storage import private_loops
from ..poly.tree import common_loops, flat_schedule
from .kernel_exprs import Reduction


def reads_of(c) -> set[str]:
    idx, value, conds = c
    exprs = [*idx, *conds, value.source if isinstance(value, Reduction) else value]
    out: set[str] = set()
    for e in exprs:
        out |= {ld.buffer for ld in loads(e)}
    return out


def assign(dtype: DType, value: Expr) -> Expr:
    """Assignment converts the value to the target's dtype, as ``out[...] = value`` in NumPy."""
    return value if value.dtype is dtype and not value.weak else cast(dtype, value)


class _Open:
    """A loop of the nest being built."""

    def __init__(self, name: str):
        self.name = name
        self.children: list[_Open | str] = []


def nesting(items: list[tuple[str, list[str], bool]],
            caps: Mapping[str, int] | None = None) -> dict[str, tuple[int, ...]]:
    """Nest statements: each shares the loops of its common leading inames with the one before
    (a reduction's update marked separate shares only the loops its initialization found
    open, so that it can run as a nest of its own), and at most ``caps[name]`` of them. Returns
    each statement's position among its siblings at every depth (``Program.nesting``)."""
    top: list[_Open | str] = []
    stack: list[_Open] = []
    shared_by_init = 0
    caps = caps or {}
    for name, loops, separate in items:
        limit = shared_by_init if separate else len(loops)
        limit = min(limit, caps.get(name, limit))
        c = 0
        while c < min(len(stack), len(loops), limit) and stack[c].name == loops[c]:
            c += 1
        del stack[c:]
        shared_by_init = c
        for it in loops[c:]:
            node = _Open(it)
            (stack[-1].children if stack else top).append(node)
            stack.append(node)
        (stack[-1].children if stack else top).append(name)
    out: dict[str, tuple[int, ...]] = {}

    def walk(children: list[_Open | str], path: tuple[int, ...]) -> None:
        for k, c in enumerate(children):
            if isinstance(c, str):
                out[c] = path + (k,)
            else:
                walk(c.children, path + (k,))
    walk(top, ())
    return out


def sharing_cap(earlier: Sequence[Statement], mine: Sequence[Statement],
                loops: Sequence[str], temporaries: set[str]) -> int | None:
    """How many of ``loops`` the statements ``mine`` of one instruction may share with the
    ``earlier`` ones: as in Loo.py, an instruction that reads a temporary runs after the
    writes it reads, so where it may read an element that a later iteration of a shared loop
    writes (``a_temp[k]`` after ``a_temp[i_inner] = ...``), it starts a loop of its own there,
    after the whole loop of the writer (on a GPU: a barrier between the two, not a race)."""
    cap: int | None = None
    for w in earlier:
        if w.buffer not in temporaries:
            continue
        for ld in (ld for s in mine for ld in loads(s.value) if ld.buffer == w.buffer):
            depth = _first_ahead(w.indices, ld.indices, loops)
            if depth is not None:
                cap = depth if cap is None else min(cap, depth)
    return cap


def _first_ahead(written: Sequence[Expr], read: Sequence[Expr], loops: Sequence[str]
                 ) -> int | None:
    """The outermost of ``loops`` in whose later iterations the element read may be written,
    or None where each index read is the one written or one written earlier (``t[i - 1]``
    after ``t[i] = ...``)."""
    if len(written) != len(read):
        return None
    depth: int | None = None
    for w, r in zip(written, read):
        if same(w, r):
            continue
        used = [c for c, it in enumerate(loops) if it in free_vars(w)]
        if not used:
            continue
        if isinstance(w, Var) and _behind(r, w):
            continue
        depth = used[0] if depth is None else min(depth, used[0])
    return depth


def _behind(r: Expr, w: Var) -> bool:
    """Is ``r`` the loop index ``w`` minus a non-negative constant?"""
    diff = simplify(r - w)
    return isinstance(diff, Const) and isinstance(diff.value, int) and diff.value <= 0


def privatized(program: Program,
               accumulators: Mapping[str, tuple[str, ...]] | None = None) -> Program:
    """Each private temporary gets one element per iteration of the loops around its uses whose
    iterations exchange no value through it (``acc`` in ``acc = 0; acc = acc + a[i, k];
    y[i] = acc`` gets one per i), so that those loops carry no dependence on it and can run in
    parallel. Lowering shrinks it back to what one iteration needs.

    ``accumulators`` names the scalar accumulators the front end made for reductions into
    arrays, with the loops of their instruction: ``acc = 0`` at the start of each iteration of
    those loops, the updates inside it, the store last. When these loops are all the loops
    around its three statements, every read of the accumulator in an iteration follows that
    iteration's ``acc = 0`` (its only element): no value flows between iterations, which is
    what the dataflow of ``private_loops`` would find, without computing it."""
    root = original_tree(program)[0]
    paths = statement_paths(root)
    accumulators = accumulators or {}
    for b in program.buffers:
        if b.role is not BufferRole.TEMP or b.scope is not MemScope.LOCAL:
            continue
        loops = _common_loops(paths, program, b.name) if b.name in accumulators else None
        if loops is None or [n.name for n in loops] != list(accumulators[b.name]):
            loops = private_loops(program, root, b.name)
        users = [s for s in program.statements
                 if s.buffer == b.name or any(ld.buffer == b.name for ld in s.reads())]
        extents = [loop_extent(program, n) for n in loops]
        if not loops or any(e is None for e in extents):
            continue
        extra = tuple(Var(n.name) for n in loops)

        def widen(e: Expr, name=b.name) -> Expr | None:
            if isinstance(e, Load) and e.buffer == name:
                return Load(name, extra + e.indices, e.dtype, e.weak)
            return None
        statements = tuple(
            Statement(s.name, s.iters, s.domain, s.buffer,
                      extra + s.indices if s.buffer == b.name else s.indices,
                      rewrite(s.value, widen), s.reduction, s.block, s.is_init)
            if s in users else s for s in program.statements)
        wide = Buffer(b.name, tuple(extents) + b.shape, b.dtype, b.role, b.scope)  # type: ignore[arg-type]
        program = program.replace(statements=statements, buffers=tuple(
            wide if x.name == b.name else x for x in program.buffers))
    return program


def _common_loops(paths: Mapping[str, list], program: Program, buffer: str) -> list | None:
    """The loops around every statement that accesses ``buffer``, outermost first."""
    users = [s.name for s in program.statements
             if s.buffer == buffer or any(ld.buffer == buffer for ld in s.reads())]
    if not users or any(u not in paths for u in users):
        return None
    return common_loops([paths[u] for u in users])


def with_roles(program: Program, declared: dict[str, int]) -> Program:
    """Inputs are never written; a written argument is an output, or inout when the kernel may
    read an element of it before writing it (the caller's values then matter)."""
    written = {s.buffer for s in program.statements}
    read = {ld.buffer for s in program.statements for ld in s.reads()}
    exposed = set()
    if any(b.role is not BufferRole.TEMP and b.name in written & read for b in program.buffers):
        exposed = reads_initial_values(program, flat_schedule(program, original_tree(program)[0]))
    buffers = []
    for b in program.buffers:
        if b.role is BufferRole.TEMP:
            buffers.append(b)
            continue
        role = (BufferRole.INPUT if b.name not in written else
                BufferRole.INOUT if b.name in exposed else BufferRole.OUTPUT)
        buffers.append(Buffer(b.name, b.shape, b.dtype, role, b.scope))
    roles = {b.name: b.role for b in buffers}
    return program.replace(buffers=tuple(buffers), args=tuple(
        sorted(program.args, key=lambda a: (declared.get(a, len(declared)),
                                            roles[a] is BufferRole.OUTPUT))))
