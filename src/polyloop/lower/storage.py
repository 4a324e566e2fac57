# SPDX-License-Identifier: Apache-2.0
"""Where temporaries live, and how big they are.

A 'shared' or 'local' temporary becomes the box of elements one iteration of its home loop
touches (``poly.storage.compact``: constant-size footprint, no value flowing between
iterations), with every index shifted to the box's corner. Otherwise it is kept whole at
function scope (global memory), which is always correct; a note in the generated code says why.

A 'global' temporary of a stage computed at a loop (``compute_at``, ``reverse_compute_at``,
``cache_read``, ``cache_write``) is sized the same way, as TVM does: the box one iteration of
that loop touches, declared in the loop's body (so each thread of a parallel loop around it
has its own). It stays whole when its stage is at the root, when no constant box holds it, on
a GPU (a work-item's private memory is not global memory), or when the box is larger than
``MAX_LOOP_BYTES`` (it would not fit a thread's stack).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.barriers import barrier_scope
from ..ir.expr import BinOpKind, Const, Expr, Load, binop, rewrite, same
from ..ir.dtypes import INDEX
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..ir.simplify import simplify
from ..errors import BuildError
from ..poly.storage import Compaction, compact, thread_loop_sharing
from ..poly.gpu import is_item
from ..poly.tree import Root, loops


# the largest temporary sized to a loop that lives on a thread's stack (OpenMP threads get a
# few MiB; a tile of a few tens of KiB leaves room for the rest)
MAX_LOOP_BYTES = 64 * 1024


def place_temporaries(program: Program, root: Root, *, size_global: bool = True
                      ) -> tuple[Program, tuple[Buffer, ...], tuple[str, ...]]:
    """The program with compacted temporaries, the temporaries, and notes for the reader.
    ``size_global=False`` keeps every 'global' temporary whole (a GPU launch's scratch)."""
    temps, notes = [], []
    for b in program.buffers:
        if b.role is not BufferRole.TEMP:
            continue
        if barrier_scope(b.name) is not None:   # no memory: lowering drops its stores
            temps.append(b)
            continue
        if b.scope is MemScope.GLOBAL and not size_global:
            temps.append(b)
            continue
        if b.scope is MemScope.GLOBAL:
            program, temp, note = _place_global(program, root, b)
            temps.append(temp)
            notes.extend(note)
            continue
        result = compact(program, root, b.name)
        if isinstance(result, str):
            _refuse_one_copy(program, root, b, result)
            notes.append(f"temporary {b.name} (scope {b.scope.value}) is stored whole in global "
                         f"memory: {result}")
            temps.append(replace(b, scope=MemScope.GLOBAL))
            program = _with_buffer(program, replace(b, scope=MemScope.GLOBAL))
            continue
        keep = tuple(d for d, n in enumerate(result.shape) if n > 1)   # others index 0
        small = replace(b, shape=tuple(Const(result.shape[d], INDEX, True) for d in keep),
                        home=result.home)
        program = _shifted(_with_buffer(program, small), result, keep)
        temps.append(small)
        where = f"one iteration of loop '{result.home}'" if result.home else "the program"
        if not _same_shape(small.shape, b.shape) and keep:
            box = "x".join(str(result.shape[d]) for d in keep)
            notes.append(f"temporary {b.name} (scope {b.scope.value}) holds the {box} "
                         f"elements used in {where}")
        elif not _same_shape(small.shape, b.shape):
            owner = ("one element per work-item" if _item_loop(root, result.home) else
                     f"one element, reused by every iteration of loop '{result.home}'"
                     if result.home else "one element")
            notes.append(f"temporary {b.name} (scope {b.scope.value}) is {owner}")
    return program, tuple(temps), tuple(notes)


def _refuse_one_copy(program: Program, root: Root, b: Buffer, why: str) -> None:
    """One array in global memory is correct only when no GPU loop relied on each of its
    iterations having its own copy of the temporary."""
    node = thread_loop_sharing(program, root, b.name)
    if node is not None:
        owner = "work-item" if node.thread is not None and node.thread.is_item else "work-group"
        raise BuildError(f"temporary {b.name} (scope {b.scope.value}) must be one copy per "
                         f"{owner} of loop '{node.name}', but it cannot be sized to one "
                         f"iteration: {why}; index it by loop '{node.name}' or make its "
                         "footprint per iteration a constant-size box")


def _place_global(program: Program, root: Root, b: Buffer
                  ) -> tuple[Program, Buffer, tuple[str, ...]]:
    """A global temporary sized to its stage's loop, or kept whole (see the module docstring)."""
    if any(n.thread is not None for n in loops(root)):
        return program, b, ()
    result = compact(program, root, b.name)
    if isinstance(result, str) or result.home is None:
        return program, b, ()
    keep = tuple(d for d, n in enumerate(result.shape) if n > 1)
    elements = 1
    for n in result.shape:
        elements *= n
    if elements * b.dtype.itemsize > MAX_LOOP_BYTES:
        return program, b, ()
    # declared in the home loop's body, one copy per iteration (and so per thread)
    small = replace(b, shape=tuple(Const(result.shape[d], INDEX, True) for d in keep),
                    scope=MemScope.LOCAL, home=result.home)
    program = _shifted(_with_buffer(program, small), result, keep)
    what = (f"holds the {'x'.join(str(result.shape[d]) for d in keep)} elements used"
            if keep else "is the one element used")
    return program, small, (f"temporary {b.name} (scope global) {what} in one iteration of "
                            f"loop '{result.home}'",)


def _item_loop(root: Root, name: str | None) -> bool:
    """Is the loop called ``name`` bound to a work-item (GPU thread) index?"""
    return name is not None and any(n.name == name and is_item(n) for n in loops(root))


def _with_buffer(program: Program, buffer: Buffer) -> Program:
    return program.replace(buffers=tuple(buffer if b.name == buffer.name else b
                                         for b in program.buffers))


def _same_shape(a: tuple[Expr, ...], b: tuple[Expr, ...]) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def _shift(indices: tuple[Expr, ...], corner: tuple[Expr, ...],
           keep: tuple[int, ...]) -> tuple[Expr, ...]:
    """The indices of the dimensions kept, less the box's corner (one per kept dimension)."""
    return tuple(simplify(binop(BinOpKind.SUB, indices[d], c)) for d, c in zip(keep, corner))


def _shifted(program: Program, c: Compaction, keep: tuple[int, ...]) -> Program:
    out = []
    for s in program.statements:
        corner = c.offsets.get(s.name)
        if corner is None:
            out.append(s)
            continue

        def fn(e: Expr, corner=corner) -> Expr | None:
            if isinstance(e, Load) and e.buffer == c.buffer:
                return Load(e.buffer, _shift(e.indices, corner, keep), e.dtype, e.weak)
            return None
        idx = _shift(s.indices, corner, keep) if s.buffer == c.buffer else s.indices
        out.append(Statement(s.name, s.iters, s.domain, s.buffer, idx, rewrite(s.value, fn),
                             s.reduction, s.block, s.is_init))
    return program.replace(statements=tuple(out))
