# SPDX-License-Identifier: Apache-2.0
"""Lowering: a scheduled program -> a target-independent Kernel (loop AST plus signature).

The pipeline is a list of named steps; ``POLYLOOP_DUMP=lower`` prints the loop nest after each.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Callable, Mapping

from .. import config
from ..errors import PolyloopError
from ..ir.expr import Expr
from ..ir.loops import Block, For, If, Kernel, Node, Store, iter_nodes, map_children
from ..ir.printer import loops_to_str
from ..ir.program import BufferRole, Program
from ..poly.astgen import HardwareLoop, build_ast
from ..poly.tree import Root
from .storage import place_temporaries
from ..ir.simplify import simplify
from .names import kernel_name
from .prefetch import apply_prefetch, mark_paths
from .promote import promote_registers
from .strength import canonical_divisions
from .tensorize import apply_tensorize


def _map_exprs(node: Node, fn: Callable[[Expr], Expr]) -> Node:
    if isinstance(node, For):
        return replace(node, start=fn(node.start), stop=fn(node.stop),
                       body=_map_exprs(node.body, fn))
    if isinstance(node, If):
        return If(fn(node.cond), _map_exprs(node.then, fn),
                  None if node.otherwise is None else _map_exprs(node.otherwise, fn))
    if isinstance(node, Block):
        return Block(tuple(_map_exprs(c, fn) for c in node.body))
    if isinstance(node, Store):
        return Store(node.buffer, tuple(fn(i) for i in node.indices), fn(node.value),
                     node.reduction, node.statement)
    return node


def _flatten(node: Node) -> Node:
    """Merge nested blocks so the printed code has no empty scopes."""
    if isinstance(node, Block):
        out: list[Node] = []
        for c in node.body:
            c = _flatten(c)
            out.extend(c.body if isinstance(c, Block) else (c,))
        return out[0] if len(out) == 1 else Block(tuple(out))
    return map_children(node, _flatten)


STEPS: tuple[tuple[str, Callable[[Node], Node]], ...] = (
    ("simplify", lambda n: _map_exprs(n, simplify)),
    ("divisions", lambda n: _map_exprs(n, canonical_divisions)),
    ("flatten", _flatten),
)


def lower(program: Program, root: Root, *, name: str | None = None,
          compact: bool = True, hardware: Mapping[int, HardwareLoop] | None = None) -> Kernel:
    """The Kernel for ``program`` scheduled by the loop tree ``root``. With ``compact=False``
    the temporaries are taken as they are (a caller that placed them already). ``hardware``:
    the loops a GPU runs as work-groups and work-items, which isl does not generate
    (``poly.astgen.build_ast``)."""
    if compact:
        program, temps, notes = place_temporaries(program, root)
    else:
        temps = tuple(b for b in program.buffers if b.role is BufferRole.TEMP)
        notes = ()
    body = build_ast(program, mark_paths(root), isolate=True, hardware=hardware)
    for step, fn in STEPS:
        try:
            body = fn(body)
        except PolyloopError:
            raise
        except Exception as e:  # a bug in a step must say which step
            raise PolyloopError(f"lowering step '{step}' failed: {e}") from e
        if "lower" in config.CONFIG.dump:
            print(f"# --- after {step}\n{loops_to_str(body)}", file=sys.stderr)
    body = apply_tensorize(program, root, body)  # after simplify: it reads isl's loop bounds
    body = apply_prefetch(program, root, body)   # after tensorize: its nests stay intact
    taken = {b.name for b in program.buffers} | set(program.params)
    body, registers, promoted = promote_registers(
        body, {b.name: b for b in program.buffers}, taken | _loop_vars(body))
    kname = kernel_name(name or program.name, taken | {r.name for r in registers})
    notes = notes + tuple(p.describe() for p in promoted)
    return Kernel(kname, tuple(program.arg_buffers()), program.params, temps + registers, body,
                  notes)


def _loop_vars(body: Node) -> set[str]:
    return {n.var for n in iter_nodes(body) if isinstance(n, For)}
