# SPDX-License-Identifier: Apache-2.0
"""Lowering of a polyloop-generated tensor intrinsic: its scheduled implementation becomes the
Kernel of a ``static inline`` C function with the ``TensorIntrin`` calling convention.

The function's arguments are the operands in call order (the written buffer, then the read
ones), its params the strides of each operand (one per dimension but the last, named
``<buffer>_stride<d>``) and then the trip counts of the symbolic axes (the implementation's own
size parameters). Its loops are the implementation's schedule as isl writes it; code generation
(``codegen.function``) indexes the operands through the strides. An update intrinsic adds to
its output, so the statements that zero the output are left out.
"""
from __future__ import annotations

import functools
from dataclasses import replace

from ..errors import BuildError
from ..ir.loops import Block, For, If, Kernel, Node, Store, map_children
from ..ir.expr import Expr
from ..ir.program import Buffer
from ..ir.simplify import simplify
from ..poly.astgen import build_ast
from ..schedule.intrin_registry import TensorIntrin
from .storage import place_temporaries


def stride_params(operands: tuple[Buffer, ...]) -> list[str]:
    """The stride parameters of the operands, in call order: ``<buffer>_stride<d>`` for each
    dimension ``d`` but the last.

    >>> from polyloop.ir.dtypes import DType
    >>> from polyloop.ir.expr import Const
    >>> from polyloop.ir.program import BufferRole
    >>> c = Buffer("c", (Const(4, DType.INT64), Const(16, DType.INT64)), DType.FLOAT32,
    ...            BufferRole.OUTPUT)
    >>> stride_params((c,))
    ['c_stride0']
    """
    return [f"{b.name}_stride{d}" for b in operands for d in range(b.ndim - 1)]


@functools.cache   # one lowering per intrinsic, however many calls a kernel has
def function_kernel(intrin: TensorIntrin) -> Kernel:
    """The Kernel of ``intrin``'s generated implementation (see the module docstring)."""
    impl = intrin.implementation
    if impl is None:
        raise BuildError(f"intrinsic '{intrin.name}' is implemented in C source, not generated")
    program, temps, notes = place_temporaries(impl.state.program, impl.state.root)
    body = _simplified(build_ast(program, impl.state.root, isolate=True))
    body = _without(body, frozenset(impl.dropped_inits)) or Block(())
    args = tuple(program.buffer(name) for name in impl.operands)
    params = tuple(stride_params(args)) + impl.trip_counts
    clash = set(params[:len(params) - len(impl.trip_counts)]) & (
        {b.name for b in program.buffers} | set(impl.trip_counts))
    if clash:
        raise BuildError(f"intrinsic '{intrin.name}': the stride parameter(s) "
                         f"{', '.join(sorted(clash))} clash with names of the implementation; "
                         "rename its buffers or size parameters")
    return Kernel(intrin.name, args, params, temps, body, notes)


def _simplified(node: Node) -> Node:
    def fix(e: Expr) -> Expr:
        return simplify(e)
    if isinstance(node, For):
        return replace(node, start=fix(node.start), stop=fix(node.stop),
                       body=_simplified(node.body))
    if isinstance(node, If):
        return If(fix(node.cond), _simplified(node.then),
                  None if node.otherwise is None else _simplified(node.otherwise))
    if isinstance(node, Store):
        return replace(node, indices=tuple(fix(i) for i in node.indices), value=fix(node.value))
    return map_children(node, _simplified)


def _without(node: Node, statements: frozenset[str]) -> Node | None:
    """``node`` without the stores of ``statements``; loops and branches left empty go too."""
    if isinstance(node, Store):
        return None if node.statement in statements else node
    if isinstance(node, Block):
        kept = [k for k in (_without(c, statements) for c in node.body) if k is not None]
        return None if not kept else kept[0] if len(kept) == 1 else Block(tuple(kept))
    if isinstance(node, For):
        body = _without(node.body, statements)
        return None if body is None else replace(node, body=body)
    if isinstance(node, If):
        then = _without(node.then, statements)
        other = None if node.otherwise is None else _without(node.otherwise, statements)
        if then is None and other is None:
            return None
        return If(node.cond, then if then is not None else Block(()), other)
    return node
