# SPDX-License-Identifier: Apache-2.0
"""What code generation made of a kernel's loop annotations, in words: which vectorized loops
became explicit vector code and why the others did not, which unrolled loops have no constant
trip count, where each temporary lives and why (sized to a loop, or whole and the reason; registers kept
across a loop; the arguments are the caller's arrays), and lowering's other notes.

>>> from polyloop.ir.loops import Block, Kernel
>>> explain_kernel(Kernel("k", (), (), (), Block(())))
()
"""
from __future__ import annotations

from ..config import CONFIG
from ..ir.expr import Const
from ..ir.loops import For, Kernel, LoopKind, iter_nodes
from ..util.isa import ISA, host_isa
from .temps import local_temp_homes
from .vector_plan import NotVectorized, plan_vector_loop, short_scalar_loop, simd_accumulation


def explain_kernel(kernel: Kernel, isa: ISA | None = None) -> tuple[str, ...]:
    """One line per fact, in loop order, each said once (isolation repeats loops)."""
    isa = isa if isa is not None else host_isa(CONFIG.cc)
    buffers = {b.name: b for b in (*kernel.args, *kernel.temps)}
    homes = local_temp_homes(kernel)
    lines: list[str] = []
    for node in iter_nodes(kernel.body):
        if not isinstance(node, For):
            continue
        if node.kind is LoopKind.VECTORIZED:
            plan = plan_vector_loop(node, buffers, isa, has_local_temps=bool(homes.get(id(node))))
            if isinstance(plan, NotVectorized):
                short = short_scalar_loop(node)
                how = (f"unrolled, {short} iterations" if short else "#pragma omp simd")
                lines.append(f"loop '{node.var}' is marked vectorized but is not explicit vector "
                             f"code: {plan.reason}; it is left to the C compiler ({how})")
            else:
                lines.append(f"loop '{node.var}': explicit vectors of {plan.lanes} lanes "
                             f"({isa.name}), remainder {plan.epilogue.value}")
        elif simd_accumulation(node, buffers, isa):
            lines.append(f"loop '{node.var}' updates a row of a loop-local tile: it is left to "
                         "the C compiler's vectorizer (not unrolled), which keeps the row in a "
                         "vector register")
        elif node.kind is LoopKind.UNROLLED and not (isinstance(node.start, Const)
                                                     and isinstance(node.stop, Const)):
            lines.append(f"loop '{node.var}' is marked unrolled but its trip count is not a "
                         f"constant here ({node.start} to {node.stop}); the C compiler unrolls "
                         "it only as far as it can")
    lines.extend(kernel.notes)
    return tuple(dict.fromkeys(lines))
