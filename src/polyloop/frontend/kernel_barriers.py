# SPDX-License-Identifier: Apache-2.0
"""Explicit barriers of ``pl.make_kernel`` (``... lbarrier {id=b, dep=w, inames=g}``): the
loops a barrier sits in, and its statement (see ``ir.barriers``).

A barrier inside loops is a statement there, so the instructions after it open loops of their
own below its inames (``kernel_program.nesting``): what runs before it finishes first. A
barrier outside every loop is no statement: the nests before and after it are separate loop
nests, which on a GPU are separate launches.
"""
from __future__ import annotations

from ..ir.barriers import BarrierScope, barrier_buffer
from ..ir.dtypes import DType
from ..ir.expr import Var, const
from ..ir.program import Buffer, BufferRole, MemScope, Statement
from ..ir.simplify import simplify
from ..poly import kernel_domains as kd
from .kernel_lines import Instruction
from .kernel_parse import error_at


def barrier_loops(insns: list[Instruction], k: int, own: list[set[str]], inames: set[str],
                  doms: list[kd.Domain], order: list[str]) -> list[str]:
    """Barrier ``insns[k]``'s loops, outermost first: its ``inames=``, else (a local one) the
    loops common to the instructions it orders (its deps and those that name it in theirs;
    without any, the instructions around it), else none (a global one)."""
    ins = insns[k]
    if ins.inames is not None:
        bad = [x for x in ins.inames if x not in inames]
        if bad:
            raise error_at(ins.text, ins.line, max(0, ins.text.find(bad[0])), f"inames= names "
                           f"{', '.join(bad)}, not inames of the kernel's domains")
        names = set(ins.inames)
    elif ins.barrier is BarrierScope.GLOBAL:
        names = set()
    else:
        linked = [j for j, x in enumerate(insns) if x.barrier is None and
                  (x.id in ins.deps or ins.id in x.deps)]
        if not linked:
            linked = [j for j in (k - 1, k + 1) if 0 <= j < len(insns)
                      and insns[j].barrier is None]
        names = set.intersection(*(own[j] for j in linked)) if linked else set()
    outer = kd.outer_inames(doms, sorted(names))
    loops = [i for i in order if i in outer]
    if loops and ins.barrier is BarrierScope.GLOBAL:
        raise error_at(ins.text, ins.line, 0, f"a global barrier inside loop(s) "
                       f"{', '.join(loops)} would have to stop every work-group in the middle "
                       "of a launch; a gbarrier stands between loop nests (each nest is a "
                       "launch): write it without inames=, or use lbarrier")
    return loops


def barrier_statement(doms: list[kd.Domain], ins: Instruction, loops: list[str]
                      ) -> Statement | None:
    """The statement of a barrier inside ``loops`` (None outside every loop)."""
    if not loops:
        return None
    assert ins.barrier is not None
    dom = kd.statement_domain(doms, ins.id, loops, [])
    return Statement(ins.id, tuple(loops), dom, barrier_buffer(ins.barrier, ins.id),
                     tuple(Var(x) for x in loops), const(True, "bool"), block=ins.id)


def barrier_array(st: Statement, params: list[str], assumptions: str) -> Buffer:
    """The buffer a barrier statement writes: one element per iteration, no memory (lowering
    drops its stores)."""
    access = kd.ArrayAccess(st.domain, st.iters, st.indices)
    exts = kd.infer_extents(st.buffer, len(st.iters), [access], params, assumptions)
    return Buffer(st.buffer, tuple(simplify(e) for e in exts), DType.BOOL, BufferRole.TEMP,
                  MemScope.GLOBAL)


__all__ = ["barrier_array", "barrier_loops", "barrier_statement"]
