# SPDX-License-Identifier: Apache-2.0
"""The small loop AST: what isl's AST becomes (in poly), what lowering finishes and codegen walks.

Loop bounds are ordinary expressions (``ir.expr``) over outer loop variables and size
parameters; ``stop`` is exclusive. Stores are statement instances with their iterators already
replaced by loop expressions.
"""
from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from .expr import Expr, ReduceKind
from .program import Buffer
from .thread_axis import ThreadAxis


class LoopKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"        # OpenMP parallel for (CPU)
    VECTORIZED = "vectorized"    # SIMD
    UNROLLED = "unrolled"
    THREAD = "thread"            # bound to a GPU index (blockIdx.x, threadIdx.y, ...)


class Node:
    __slots__ = ()


_node = dataclass(frozen=True, slots=True, eq=False)


@_node
class For(Node):
    var: str
    start: Expr
    stop: Expr                    # exclusive
    body: Node
    kind: LoopKind = LoopKind.SERIAL
    step: int = 1
    unroll_factor: int | None = None   # UNROLLED: None means full unroll
    thread: ThreadAxis | None = None   # THREAD: the GPU index it runs on
    annotations: tuple[tuple[str, object], ...] = ()   # values: str or a loop_notes type


@_node
class If(Node):
    cond: Expr
    then: Node
    otherwise: Node | None = None


@_node
class Block(Node):
    body: tuple[Node, ...]


@_node
class Store(Node):
    """``buffer[indices] = value``, or ``buffer[indices] op= value`` for a reduction update."""
    buffer: str
    indices: tuple[Expr, ...]
    value: Expr
    reduction: ReduceKind | None = None
    statement: str = ""


@_node
class Barrier(Node):
    """Work-group barrier (GPU targets)."""
    scope: str = "local"


@_node
class Region:
    """The address of ``buffer[indices]``: where an operand of a ``Call`` starts."""
    buffer: str
    indices: tuple[Expr, ...]


@_node
class Call(Node):
    """A call of a tensor intrinsic's implementation (``tensorize``): ``function(args)``.

    ``source`` (or ``implementation``) defines the function; code generation emits it once per
    module."""
    function: str
    args: tuple[Region | Expr, ...]
    source: str = ""
    statement: str = ""           # the statement whose full tiles the call computes
    # a polyloop-generated implementation: the function's own kernel (its args are the
    # operands in call order, its params their strides then the trip counts); code generation
    # prints it as ``source``
    implementation: Kernel | None = None


@_node
class Prefetch(Node):
    """A software prefetch hint (``Schedule.prefetch``): bring the ``count`` consecutive
    elements of ``buffer`` that start at ``buffer[indices]`` (along its last dimension) into the
    cache, for reading or, with ``write``, for writing; ``locality`` 0..3 says how long they
    should stay (3: in every cache level). It never changes a result: a target may spell it as
    one instruction per cache line, as a single call, or not at all."""
    buffer: str
    indices: tuple[Expr, ...]
    count: Expr
    write: bool = False
    locality: int = 3


@dataclass(frozen=True, slots=True, eq=False)
class Kernel:
    """A whole function: arguments in call order, size parameters, temporaries, the body."""
    name: str
    args: tuple[Buffer, ...]
    params: tuple[str, ...]
    temps: tuple[Buffer, ...]
    body: Node
    notes: tuple[str, ...] = field(default=())


def map_children(n: Node, fn: Callable[[Node], Node]) -> Node:
    """``n`` with ``fn`` applied to each of its direct child nodes (loop body, branches, block
    items); leaves come back as they are. The one structural copy that rewrites of the loop AST
    build on."""
    if isinstance(n, For):
        return replace(n, body=fn(n.body))
    if isinstance(n, If):
        return If(n.cond, fn(n.then), None if n.otherwise is None else fn(n.otherwise))
    if isinstance(n, Block):
        return Block(tuple(fn(c) for c in n.body))
    return n


def iter_nodes(n: Node):
    """Pre-order walk over the loop AST."""
    yield n
    if isinstance(n, For):
        yield from iter_nodes(n.body)
    elif isinstance(n, If):
        yield from iter_nodes(n.then)
        if n.otherwise is not None:
            yield from iter_nodes(n.otherwise)
    elif isinstance(n, Block):
        for c in n.body:
            yield from iter_nodes(c)


def map_exprs(node: Node, fn: Callable[[Expr], Expr]) -> Node:
    """``node`` with ``fn`` applied to every expression in it: loop bounds, conditions, stored
    indices and values, the operands of intrinsic calls and prefetches."""
    if isinstance(node, For):
        return replace(node, start=fn(node.start), stop=fn(node.stop),
                       body=map_exprs(node.body, fn))
    if isinstance(node, If):
        return If(fn(node.cond), map_exprs(node.then, fn),
                  None if node.otherwise is None else map_exprs(node.otherwise, fn))
    if isinstance(node, Block):
        return Block(tuple(map_exprs(c, fn) for c in node.body))
    if isinstance(node, Store):
        return replace(node, indices=tuple(fn(i) for i in node.indices), value=fn(node.value))
    if isinstance(node, Call):
        return replace(node, args=tuple(
            Region(a.buffer, tuple(fn(i) for i in a.indices)) if isinstance(a, Region)
            else fn(a) for a in node.args))
    if isinstance(node, Prefetch):
        return replace(node, indices=tuple(fn(i) for i in node.indices), count=fn(node.count))
    return node
