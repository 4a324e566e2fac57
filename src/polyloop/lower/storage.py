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
from ..poly.double_buffer import double_buffered
from ..poly.storage import Compaction, compact, thread_loop_sharing
from ..poly.gpu import is_item
from ..poly.tree import Root, loops, path_to


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
            notes.append(f"temporary {b.name} (scope global) is stored whole in global memory "
                         "for the launch (GPU scratch memory the host allocates)")
            continue
        if b.scope is MemScope.GLOBAL:
            program, temp, note = _place_global(program, root, b)
            temps.append(temp)
            notes.extend(note)
            continue
        result = _compaction(program, root, b, notes)
        if isinstance(result, str):
            _refuse_one_copy(program, root, b, result)
            notes.append(f"temporary {b.name} (scope {b.scope.value}) is stored whole in global "
                         f"memory: {result}")
            temps.append(replace(b, scope=MemScope.GLOBAL))
            program = _with_buffer(program, replace(b, scope=MemScope.GLOBAL))
            continue
        keep = tuple(d for d, n in enumerate(result.shape) if n > 1)   # others index 0
        box = (result.stages,) * (result.stages > 1) + tuple(result.shape[d] for d in keep)
        box = _aligned(b, box, keep, result.stages > 1, notes)
        small = replace(b, shape=tuple(Const(n, INDEX, True) for n in box), home=result.home,
                        home_loops=result.home_path or _home_loops(root, result.home))
        program = _shifted(_with_buffer(program, small), result, keep)
        temps.append(small)
        note = _placed_note(root, b, small, result, keep)
        if note:
            notes.append(note)
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
    """A global temporary sized to its stage's loop, or kept whole (see the module docstring),
    with the note that says which and why."""
    whole = f"temporary {b.name} (scope global) is stored whole for the call"
    if any(n.thread is not None for n in loops(root)):
        return program, b, (f"{whole}: the program runs on a GPU, where a work-item's memory "
                            "is not global memory",)
    result = compact(program, root, b.name)
    if isinstance(result, str):
        return program, b, (f"{whole}: {result}",)
    if result.home is None:
        return program, b, (f"{whole}: its stage is computed at the root (no loop encloses all "
                            "its uses; compute_at a loop to give it a smaller home)",)
    keep = tuple(d for d, n in enumerate(result.shape) if n > 1)
    elements = 1
    for n in result.shape:
        elements *= n
    if elements * b.dtype.itemsize > MAX_LOOP_BYTES:
        return program, b, (f"{whole}: one iteration of loop '{result.home}' uses "
                            f"{'x'.join(str(n) for n in result.shape)} elements "
                            f"({elements * b.dtype.itemsize} bytes), more than the "
                            f"{MAX_LOOP_BYTES // 1024} KiB a thread's stack holds",)
    # declared in the home loop's body, one copy per iteration (and so per thread)
    small = replace(b, shape=tuple(Const(result.shape[d], INDEX, True) for d in keep),
                    scope=MemScope.LOCAL, home=result.home,
                    home_loops=result.home_path or _home_loops(root, result.home))
    program = _shifted(_with_buffer(program, small), result, keep)
    what = (f"holds the {'x'.join(str(result.shape[d]) for d in keep)} elements used"
            if keep else "is the one element used")
    return program, small, (f"temporary {b.name} (scope global) {what} in one iteration of "
                            f"loop '{result.home}', declared in that loop's body (one per "
                            "iteration, and so per thread)",)


def _placed_note(root: Root, b: Buffer, small: Buffer, result: Compaction,
                 keep: tuple[int, ...]) -> str | None:
    """What the reader of the generated code is told about a compacted temporary."""
    where = f"one iteration of loop '{result.home}'" if result.home else "the program"
    head = f"temporary {b.name} (scope {b.scope.value})"
    if result.stages > 1:
        inner = "x".join(str(result.shape[d]) for d in keep) or "1"
        return (f"{head} is {result.stages} boxes of {inner} elements, used in turn by the "
                f"iterations of loop '{result.home}' (double buffering)")
    if _same_shape(small.shape, b.shape):
        return (f"{head} keeps its whole shape: one iteration of {where[4:] if result.home else 'the program'} "
                "uses all of it")
    if keep:
        box = "x".join(str(result.shape[d]) for d in keep)
        return f"{head} holds the {box} elements used in {where}"
    owner = ("one element per work-item" if _item_loop(root, result.home) else
             f"one element, reused by every iteration of loop '{result.home}'"
             if result.home else "one element")
    return f"{head} is {owner}"


def _compaction(program: Program, root: Root, b: Buffer, notes: list[str]
                ) -> Compaction | str:
    """The compaction of a 'shared' or 'local' temporary: into alternating boxes when the
    schedule asked for double buffering and it still holds (else the ordinary one, which is
    always correct, and a note saying why)."""
    if b.stages > 1:
        result = double_buffered(program, root, b.name)
        if not isinstance(result, str):
            return result
        notes.append(f"double buffering of {b.name} not applied: {result}")
    return compact(program, root, b.name)


def _aligned(b: Buffer, box: tuple[int, ...], keep: tuple[int, ...], staged: bool,
             notes: list[str]) -> tuple[int, ...]:
    """``box`` with the dimension after each aligned axis padded so that the axis' stride
    is ``offset`` modulo ``factor`` (Schedule.storage_align); the accesses keep their
    indices, so they stay inside the unpadded part."""
    out = list(box)
    first = 1 if staged else 0          # the stage dimension leads
    for a in b.align:
        if a.axis not in keep or keep.index(a.axis) + 1 >= len(keep):
            notes.append(f"storage_align of {b.name} axis {a.axis} not applied: that "
                         "dimension was compacted away or is the innermost one left")
            continue
        pad = first + keep.index(a.axis) + 1
        inner = 1
        for n in out[pad + 1:]:
            inner *= n
        size = next((s for s in range(out[pad], out[pad] + a.factor)
                     if s * inner % a.factor == a.offset), None)
        if size is None:
            notes.append(f"storage_align of {b.name} axis {a.axis} not applied: no row of "
                         f"{out[pad]} to {out[pad] + a.factor - 1} elements times {inner} is "
                         f"{a.offset} modulo {a.factor}")
            continue
        if size != out[pad]:
            notes.append(f"temporary {b.name}: dimension {pad} padded from {out[pad]} to "
                         f"{size} elements (storage_align)")
        out[pad] = size
    return tuple(out)


def _home_loops(root: Root, name: str | None) -> tuple[str, ...]:
    """The names of the loops from the outermost down to the loop called ``name``."""
    for node in loops(root):
        if node.name == name:
            return tuple(n.name for n in path_to(root, node.id) or ())
    return ()


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


def _stage(c: Compaction, indices: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """The index of the box an access uses: its rotating index modulo the boxes (none when
    the temporary is one box)."""
    if c.stages == 1 or c.rotating is None:
        return ()
    return (simplify(binop(BinOpKind.MOD, indices[c.rotating], Const(c.stages, INDEX, True))),)


def _shifted(program: Program, c: Compaction, keep: tuple[int, ...]) -> Program:
    out = []
    for s in program.statements:
        corner = c.offsets.get(s.name)
        if corner is None:
            out.append(s)
            continue

        def fn(e: Expr, corner=corner) -> Expr | None:
            if isinstance(e, Load) and e.buffer == c.buffer:
                return Load(e.buffer, _stage(c, e.indices) + _shift(e.indices, corner, keep),
                            e.dtype, e.weak)
            return None
        idx = (_stage(c, s.indices) + _shift(s.indices, corner, keep) if s.buffer == c.buffer
               else s.indices)
        out.append(Statement(s.name, s.iters, s.domain, s.buffer, idx, rewrite(s.value, fn),
                             s.reduction, s.block, s.is_init))
    return program.replace(statements=tuple(out))
