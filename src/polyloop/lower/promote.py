# SPDX-License-Identifier: Apache-2.0
"""Register promotion (scalar replacement) of an element written in a loop nest.

An accumulator such as ``C[i][j]`` updated in every iteration of an inner loop ``k`` is loaded
into a register before ``k``, updated there, and stored once after it, instead of going through
memory at every step. The region promoted is the box of elements that the *register loops*
enclosing the access touch (unrolled or vectorized loops of constant extent: what a compiler
can keep in registers), so a whole row of vectors of ``C`` stays in vector registers across an
unrolled ``k``.

A buffer ``X`` is promoted across a loop ``L`` only when that is exact:

- the accesses promoted (loads and stores) have one and the same index tuple, that of the
  first store to ``X`` in ``L``'s body, which depends on no loop inside ``L`` other than
  register loops enclosing every such access (each register holds one element: each register
  loop's variable appears, affinely, in exactly one index dimension and a dimension holds at
  most one of them);
- every other access to ``X`` in ``L``'s body never touches a promoted element: isl finds no
  iteration (each loop, enclosing ``L`` or inside it, within its bounds) where the two index
  tuples are equal (``poly.apart``), so ``A[i][k]`` and ``A[j][k]`` inside ``for k < j`` beside
  ``A[i][j]`` (a Cholesky update, with ``j < i``) leave ``A[i][j]`` to its register;
- ``X`` is not named in a loop bound, a condition or an index inside ``L``, no condition lies
  between ``L`` and an access, and the body holds no call of an intrinsic, no barrier and no
  GPU-bound loop;
- the copies read and write only elements the nest itself touches: the loops between ``L`` and
  the access that are not register loops have bounds that depend only on loops outside ``L``,
  and the copies run only when all of them have an iteration (a guard when that is not known).

Buffers are distinct arrays (arguments are ``restrict``), so the accesses to other buffers
cannot reach the promoted element.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from ..ir.dtypes import INDEX
from ..ir.expr import (BinOp, BinOpKind, Const, Expr, Load, Var, binop, free_vars, loads, rewrite,
                       same)
from ..ir.loops import (Barrier, Block, Call, For, If, LoopKind, Node, Store, iter_nodes,
                        map_children)
from ..ir.program import Buffer, BufferRole, MemScope
from ..ir.shapes import evaluate
from ..ir.simplify import affine_form, simplify, split_terms
from ..ir.traverse import substitute
from ..errors import PolyloopError
from ..poly.apart import Bound, never_equal

# the most elements one promotion keeps in registers (AVX-512 has 32 registers of 16 floats)
MAX_ELEMENTS = 256
_REGISTER_KINDS = (LoopKind.VECTORIZED, LoopKind.UNROLLED)


@dataclass(frozen=True, slots=True)
class _Access:
    indices: tuple[Expr, ...]
    path: tuple[For, ...]         # loops between the candidate loop and the access
    under_if: bool
    write: bool


@dataclass(frozen=True, slots=True)
class Promotion:
    """One buffer kept in registers across one loop: what the generated code says about it."""
    buffer: str
    register: str
    loop: str
    elements: int

    def describe(self) -> str:
        return (f"{self.buffer}: {self.elements} element(s) kept in registers ({self.register}) "
                f"across loop '{self.loop}'")


def promote_registers(body: Node, buffers: dict[str, Buffer], taken: set[str]
                      ) -> tuple[Node, tuple[Buffer, ...], tuple[Promotion, ...]]:
    """``body`` with accumulators kept in registers, the register temporaries it declares, and
    what was promoted. ``buffers``: every buffer by name; ``taken``: names already in use.

    >>> from polyloop.ir.loops import Block
    >>> promote_registers(Block(()), {}, set())
    (Block(body=()), (), ())
    """
    state = _State(buffers, set(taken), [], [])
    return state.visit(body), tuple(state.temps), tuple(state.done)


@dataclass
class _State:
    buffers: dict[str, Buffer]
    taken: set[str]
    temps: list[Buffer]
    done: list[Promotion]

    def visit(self, node: Node, outer: tuple[For, ...] = ()) -> Node:
        """``node`` with its promotions; ``outer``: the loops enclosing it, outermost first."""
        if isinstance(node, For) and node.kind in (LoopKind.SERIAL, LoopKind.UNROLLED) \
                and not _blocked(node.body):
            for name in _written(node.body):
                out = self.promote(node, name, outer)
                if out is not None:
                    return self.visit_promoted(out, outer)
        inside = outer + (node,) if isinstance(node, For) else outer
        return map_children(node, lambda c: self.visit(c, inside))

    def visit_promoted(self, node: Node, outer: tuple[For, ...]) -> Node:
        """Look for more promotions inside the loop just promoted (other buffers)."""
        if isinstance(node, For):
            return map_children(node, lambda c: self.visit(c, outer + (node,)))
        return map_children(node, lambda c: self.visit_promoted(c, outer))

    def promote(self, loop: For, name: str, outer: tuple[For, ...]) -> Node | None:
        buffer = self.buffers.get(name)
        if buffer is None or any(t.name == name for t in self.temps):
            return None
        accesses = list(_accesses(loop.body, name, (), False))
        key = next((a for a in accesses if a.write), None)
        if key is None or any(not a.indices for a in accesses):
            return None
        mine = [a for a in accesses if _same_indices(a.indices, key.indices)]
        regs = _register_loops(loop, mine)
        others = [a for a in accesses if not _same_indices(a.indices, key.indices)]
        if regs is None or not _apart(outer + (loop,), key, regs, others):
            return None
        indices = key.indices
        guard = _guard(loop, key.path, regs)
        if guard is None:
            return None
        shape = tuple(_extent_bound(r) or 0 for r in regs)
        count = 1
        for n in shape:
            count *= n
        if count > MAX_ELEMENTS:
            return None
        reg = Buffer(self.fresh(f"{name}_reg"), tuple(Const(n, INDEX, True) for n in shape)
                     or (Const(1, INDEX, True),), buffer.dtype, BufferRole.TEMP, MemScope.LOCAL)
        ridx: tuple[Expr, ...] = tuple(simplify(binop(BinOpKind.SUB, Var(r.var), r.start))
                                       for r in regs) or (Const(0, INDEX, True),)
        reads = any(not a.write for a in accesses) or _reduces(loop.body, name)
        inner = _replace(loop, name, indices, reg.name, ridx, buffer)
        parts: list[Node] = []
        if reads:
            parts.append(_nest(regs, Store(reg.name, ridx, Load(name, indices, buffer.dtype))))
        parts.append(inner)
        parts.append(_nest(regs, Store(name, indices, Load(reg.name, ridx, buffer.dtype))))
        self.temps.append(reg)
        self.done.append(Promotion(name, reg.name, loop.var, count))
        out: Node = Block(tuple(parts))
        return out if guard is True else If(guard, out)

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        return name


def _blocked(node: Node) -> bool:
    """Does the nest hold something promotion does not reason about?"""
    return any(isinstance(n, (Call, Barrier))
               or isinstance(n, For) and n.kind is LoopKind.THREAD for n in iter_nodes(node))


def _written(node: Node) -> list[str]:
    """Buffers stored to in the nest, in order of first store."""
    return list(dict.fromkeys(n.buffer for n in iter_nodes(node) if isinstance(n, Store)))


def _accesses(node: Node, name: str, path: tuple[For, ...], under_if: bool):
    """Every access to ``name`` in the nest; one with ``indices == ()`` marks a use of the
    buffer in a bound, a condition or an index (never promoted)."""
    bad = _Access((), path, under_if, False)
    if isinstance(node, For):
        if _mentions(node.start, name) or _mentions(node.stop, name):
            yield bad
        yield from _accesses(node.body, name, path + (node,), under_if)
    elif isinstance(node, If):
        if _mentions(node.cond, name):
            yield bad
        yield from _accesses(node.then, name, path, True)
        if node.otherwise is not None:
            yield from _accesses(node.otherwise, name, path, True)
    elif isinstance(node, Block):
        for c in node.body:
            yield from _accesses(c, name, path, under_if)
    elif isinstance(node, Store):
        if any(_mentions(i, name) for i in node.indices):
            yield bad
        if node.buffer == name:
            yield _Access(node.indices, path, under_if, True)
        for ld in loads(node.value):
            if ld.buffer == name:
                yield _Access(ld.indices, path, under_if, False)
            if any(_mentions(i, name) for i in ld.indices):
                yield bad


def _mentions(e: Expr, name: str) -> bool:
    return any(ld.buffer == name for ld in loads(e))


def _reduces(node: Node, name: str) -> bool:
    return any(isinstance(n, Store) and n.buffer == name and n.reduction is not None
               for n in iter_nodes(node))


def _same_indices(a: tuple[Expr, ...], b: tuple[Expr, ...]) -> bool:
    return len(a) == len(b) and all(x is y or same(x, y) for x, y in zip(a, b))


def _apart(outer: tuple[For, ...], key: _Access, regs: tuple[For, ...],
           others: list[_Access]) -> bool:
    """Does no access of ``others`` touch an element the promotion keeps in registers, at any
    iteration of the loops ``outer`` (enclosing, the promoted loop last) and its own loops?
    The register loops' variables are renamed in the promoted index (a register and another
    access in the same register iteration need not coincide)."""
    if not others:
        return True
    if any(f.step < 1 for f in outer + regs) or any(f.step < 1 for a in others for f in a.path):
        return False
    names = {f.var for f in outer} | {f.var for a in others for f in a.path}
    names |= set().union(*(free_vars(i) for a in (key, *others) for i in a.indices))
    renamed: dict[str, Expr] = {}
    for r in regs:
        new = f"{r.var}_kept"
        while new in names:
            new += "_"
        names.add(new)
        renamed[r.var] = Var(new)
    kept = tuple(substitute(i, renamed) for i in key.indices)
    base: list[Bound] = [(f.var, f.start, f.stop) for f in outer]
    base += [(renamed[r.var].name, r.start, r.stop) for r in regs]  # type: ignore[attr-defined]
    return all(never_equal(kept, a.indices, base + [(f.var, f.start, f.stop) for f in a.path])
               for a in others)


def _register_loops(loop: For, accesses: list[_Access]) -> tuple[For, ...] | None:
    """The register loops of the promotion, outermost first; None if it is not exact."""
    if not accesses or any(a.under_if or not a.indices for a in accesses):
        return None
    first = accesses[0]
    if any(a.path != first.path or len(a.indices) != len(first.indices)
           or any(x is not y and not same(x, y) for x, y in zip(a.indices, first.indices))
           for a in accesses[1:]):
        return None
    used = set().union(*(free_vars(i) for i in first.indices))
    if loop.var in used or any(loads(i) for i in first.indices):
        return None
    regs = tuple(f for f in first.path if f.var in used)
    inner = {loop.var} | {f.var for f in first.path}
    if any(f.kind not in _REGISTER_KINDS or f.step != 1 or _extent_bound(f) is None
           or (free_vars(f.start) | free_vars(f.stop)) & inner for f in regs):
        return None
    return regs if _injective(first.indices, regs) else None


def _injective(indices: tuple[Expr, ...], regs: tuple[For, ...]) -> bool:
    """Do distinct registers hold distinct elements? Yes when each register loop variable
    appears affinely in exactly one index dimension, with at most one of them per dimension;
    otherwise (a fused register loop indexed by ``f // 4`` and ``f % 4``) when every index is a
    part in the register loops alone plus a part in none of them, and the parts give distinct
    tuples over all register iterations (counted: there are at most ``MAX_ELEMENTS``)."""
    return _affine_injective(indices, regs) or _enumerated_injective(indices, regs)


def _enumerated_injective(indices: tuple[Expr, ...], regs: tuple[For, ...]) -> bool:
    names = {r.var for r in regs}
    parts = []
    for ix in indices:
        split = split_terms(ix, names)
        if split is None:
            return False
        parts.append(split[0])
    ranges = []
    for r in regs:
        n = _extent_bound(r)
        if not isinstance(r.start, Const) or n is None:
            return False
        ranges.append(range(r.start.value, r.start.value + n))
    if math.prod(len(x) for x in ranges) > MAX_ELEMENTS:
        return False
    seen = set()
    for point in itertools.product(*ranges):
        env = {r.var: Const(v, INDEX, True) for r, v in zip(regs, point)}
        try:
            seen.add(tuple(evaluate(substitute(p, env), {}) for p in parts))
        except PolyloopError:
            return False
    return len(seen) == math.prod(len(x) for x in ranges)


def _affine_injective(indices: tuple[Expr, ...], regs: tuple[For, ...]) -> bool:
    names = {r.var for r in regs}
    seen: set[str] = set()
    for ix in indices:
        if not free_vars(ix) & names:
            continue
        form = affine_form(ix)
        if form is None:
            return False
        here = {v for v, c in form[0].items() if v in names and c != 0}
        if len(here) > 1 or here & seen:
            return False
        seen |= here
    return seen == names


def _extent_bound(loop: For) -> int | None:
    """A positive constant bound on the trip count of ``loop`` (``min(32, n - 32 * j0)``: 32),
    or None."""
    def bound(stop: Expr) -> int | None:
        d = simplify(binop(BinOpKind.SUB, stop, loop.start))
        if isinstance(d, Const) and isinstance(d.value, int):
            return d.value
        if isinstance(stop, BinOp) and stop.op is BinOpKind.MIN:
            found = [b for b in (bound(stop.lhs), bound(stop.rhs)) if b is not None]
            return min(found) if found else None
        return None
    n = bound(loop.stop)
    return n if n is not None and n > 0 else None


def _guard(loop: For, path: tuple[For, ...], regs: tuple[For, ...]) -> Expr | bool | None:
    """The condition under which the nest touches its elements at all: every loop from ``loop``
    to the access that is not a register loop has an iteration. True when it always holds;
    None when a bound depends on a loop inside ``loop``."""
    inner = {loop.var} | {f.var for f in path}
    cond: Expr | None = None
    for f in (loop, *path):
        if f in regs:
            continue
        if (free_vars(f.start) | free_vars(f.stop)) & inner:
            return None
        if isinstance(f.start, Const) and isinstance(f.stop, Const):
            if f.stop.value <= f.start.value:
                return None
            continue
        c = binop(BinOpKind.LT, f.start, f.stop)
        cond = c if cond is None else binop(BinOpKind.AND, cond, c)
    return True if cond is None else cond


def _nest(regs: tuple[For, ...], store: Store) -> Node:
    node: Node = store
    for r in reversed(regs):
        node = For(r.var, r.start, r.stop, node, r.kind, 1, r.unroll_factor)
    return node


def _replace(loop: For, name: str, indices: tuple[Expr, ...], reg: str,
             ridx: tuple[Expr, ...], buffer: Buffer) -> For:
    def kept(buffer_name: str, at: tuple[Expr, ...]) -> bool:
        return buffer_name == name and _same_indices(at, indices)

    def fix(e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, Load) and kept(x.buffer, x.indices):
                return Load(reg, ridx, x.dtype, x.weak)
            return None
        return rewrite(e, fn)

    def walk(n: Node) -> Node:
        if isinstance(n, Store):
            mine = kept(n.buffer, n.indices)
            target = reg if mine else n.buffer
            idx = ridx if mine else n.indices
            return Store(target, idx, fix(n.value), n.reduction, n.statement)
        return map_children(n, walk)
    return replace(loop, body=walk(loop.body))
