# SPDX-License-Identifier: Apache-2.0
"""Kernels run by a team of threads that is already running: a model's one parallel region.

A compiled model calls many small kernels per run. Each kernel's ``#pragma omp parallel for``
starts the threads and waits for all of them; with threads that sleep while they wait (the
default, ``runtime/openmp.py``) every region pays a wake-up. The model's entry
(``graph/team.py``) therefore opens ONE region per run of kernels and calls, on every thread
of it, a variant of each kernel compiled for "called inside the team":

``int32_t pl_team_NAME(void **args, const int64_t *params, int32_t pl_thread,
int32_t pl_threads, int32_t pl_lead)`` runs thread ``pl_thread``'s part of the kernel's one
parallel loop: the iterations split into ``pl_threads`` contiguous parts, as OpenMP's
``schedule(static)`` splits them (so a thread touches the same part of a tensor in consecutive
kernels). A loop whose work is below ``MIN_PARALLEL_WORK`` (the ``if`` clause of the
stand-alone kernel) runs whole on thread ``pl_lead``. The variant has no OpenMP construct at
all: nothing in it can open a nested region, and it never waits; the entry places the
barriers between kernels.

Each kernel gets a role (``team_role``): SHARED kernels (one parallel loop at the top of the
body, after at most a serial prologue that fills temporaries; no run-time index check) have
the variant, whose temporaries are each thread's own;
ONE_THREAD kernels have no parallel loop and run as they are on one thread of the team; a
kernel of any other form is ALONE: the entry runs it outside the team, where its own
``omp parallel for`` works as in a stand-alone module.
"""
from __future__ import annotations

import enum

from ..ir.expr import Const
from ..ir.loop_notes import NoteKey
from ..ir.loops import Barrier, Block, Call, For, Kernel, LoopKind, Node, Store, iter_nodes
from .parallel import MIN_PARALLEL_WORK, work
from .temps import temp_homes
from .writer import CodeWriter

TEAM_SIGNATURE = ("int32_t {name}(void **args, const int64_t *params, int32_t pl_thread, "
                  "int32_t pl_threads, int32_t pl_lead)")
TEAM_PARAMETERS = ("const int32_t pl_thread", "const int32_t pl_threads", "const int32_t pl_lead")
TEAM_ARGUMENTS = ("pl_thread", "pl_threads", "pl_lead")


class TeamRole(enum.Enum):
    """How a model's entry runs a kernel inside its parallel region (module docstring)."""

    SHARED = "shared"           # every thread runs its part of the one parallel loop
    ONE_THREAD = "one thread"   # no parallel loop: one thread runs the kernel
    ALONE = "alone"             # other forms: run outside the team, with its own region


def team_symbol(entry: str) -> str:
    """The C function of ``entry``'s team variant.

    >>> team_symbol("conv_3")
    'pl_team_conv_3'
    """
    return f"pl_team_{entry}"


def shared_loop(kernel: Kernel) -> For | None:
    """The parallel loop a SHARED kernel splits among the team, else None: the body's last
    top-level node and only parallel loop, with a static schedule, after a serial prologue
    that writes only temporaries at function scope (every thread runs it into its own
    copies: an iteration of a parallel loop reads nothing another one writes)."""
    parts = _top_level(kernel.body)
    loop = parts[-1] if parts else None
    if not (isinstance(loop, For) and loop.kind is LoopKind.PARALLEL):
        return None
    if any(k == NoteKey.BALANCED for k, _ in loop.annotations):
        return None     # handed out dynamically (parallel.py): stays an omp parallel for
    if any(isinstance(n, For) and n.kind is LoopKind.PARALLEL for n in iter_nodes(loop.body)):
        return None
    private = {b.name for b in temp_homes(kernel)[1]}
    for part in parts[:-1]:
        for n in iter_nodes(part):
            if isinstance(n, (Call, Barrier)) or isinstance(n, For) and \
                    n.kind is LoopKind.PARALLEL or isinstance(n, Store) and \
                    n.buffer not in private:
                return None
    return loop


def _top_level(body: Node) -> tuple[Node, ...]:
    while isinstance(body, Block) and len(body.body) == 1:
        body = body.body[0]
    return body.body if isinstance(body, Block) else (body,)


def team_role(kernel: Kernel, *, checks_indices: bool) -> TeamRole:
    """The kernel's role in a model's parallel region. ``checks_indices``: whether its code
    checks indices at run time (their fault report is per call, not per thread).

    >>> from polyloop.ir.dtypes import INDEX
    >>> from polyloop.ir.loops import Block
    >>> team_role(Kernel("nop", (), (), (), Block(())), checks_indices=False).value
    'one thread'
    """
    if not any(isinstance(n, For) and n.kind is LoopKind.PARALLEL
               for n in iter_nodes(kernel.body)):
        return TeamRole.ONE_THREAD
    if shared_loop(kernel) is None or checks_indices:
        return TeamRole.ALONE
    return TeamRole.SHARED


def team_parts(loop: For, index_expr) -> str:
    """The C expression of how many parts ``loop`` is split into: every thread's when its
    work (``parallel.work``) reaches ``MIN_PARALLEL_WORK``, else one. ``index_expr`` prints an
    expression of the sizes."""
    amount = work(loop)
    if isinstance(amount, Const):
        return "pl_threads" if amount.value >= MIN_PARALLEL_WORK else "1"
    return f"{index_expr(amount)} >= {MIN_PARALLEL_WORK} ? pl_threads : 1"


def emit_part_bounds(w: CodeWriter, first: str, trips: str, parts: str) -> None:
    """Declare ``pl_first`` and ``pl_lo``/``pl_hi``, the iterations (counted from 0) of this
    thread's part of a loop whose first iteration is ``first``, that runs ``trips`` times
    and is split in ``parts`` (C expressions, ``team_parts``): as ``schedule(static)``, the
    first ``trips % parts`` parts one iteration longer. A loop in one part runs on thread
    ``pl_lead``; the other threads get no iteration."""
    w.statement(f"const int64_t pl_first = {first}, pl_trips = {trips}")
    w.statement(f"const int64_t pl_parts = {parts}")
    w.statement("const int64_t pl_part = pl_parts > 1 ? pl_thread : "
                "pl_thread == pl_lead ? 0 : pl_parts")
    w.statement("const int64_t pl_q = pl_trips / pl_parts, pl_r = pl_trips % pl_parts")
    w.statement("const int64_t pl_lo = pl_part < pl_parts ? "
                "pl_part * pl_q + (pl_part < pl_r ? pl_part : pl_r) : 0")
    w.statement("const int64_t pl_hi = pl_part < pl_parts ? pl_lo + pl_q + (pl_part < pl_r) : 0")
