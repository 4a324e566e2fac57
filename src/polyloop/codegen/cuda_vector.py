# SPDX-License-Identifier: Apache-2.0
"""``float4`` code for a vectorized loop of the CUDA target.

A vectorized loop of 4 iterations whose body is a list of stores is written lane by lane
(the loop unrolled) with each contiguous float32 load of global or shared memory read once, as
a 128-bit ``float4`` at the first lane, and its lanes used as ``.x .y .z .w``. A store whose
value is such a load (a copy) becomes one ``float4`` store. A load or store qualifies when its
last index is ``var + (terms without var)``, no other index mentions ``var``, its buffer has a
constant shape, and its offset at the first lane is a multiple of 4 elements (16 bytes; the
runtime checks that argument pointers are 16-byte aligned and shared arrays are declared
``__align__(16)``). A buffer the loop writes is never read as a vector (a lane would see the
old value), nor is a load under a condition (it might not exist). Registers ('local' scope)
are left scalar: a vector view of a register array forces it into memory.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.dtypes import DType
from ..ir.expr import (BinOpKind, Const, Expr, Load, Select, Var, VarKind, binop, children,
                       rewrite, substitute)
from ..ir.loops import For, Store
from ..ir.program import Buffer, MemScope
from ..ir.simplify import simplify
from .gpu import flat_index, trip_count
from .names import NameKind
from .vector_plan import affine, body_stores, index_stride, load_key
from .writer import CodeWriter

if TYPE_CHECKING:
    from .cuda import CudaPrinter

LANES = 4
LANE_FIELDS = "xyzw"


class Float4Loop:
    """The float4 form of one vectorized loop, if it has one (``why_not`` is None)."""

    def __init__(self, printer: "CudaPrinter", loop: For) -> None:
        self.printer, self.loop = printer, loop
        self.stores = body_stores(loop.body) or []
        self.loads: dict[tuple, Load] = {}      # load_key -> the vector load
        self.why_not = self._plan()

    def _plan(self) -> str | None:
        loop = self.loop
        if loop.step != 1 or trip_count(loop) != LANES:
            return f"its trip count is not the constant {LANES}"
        if body_stores(loop.body) is None:
            return "its body is not a list of stores"
        written = {s.buffer for s in self.stores}
        for s in self.stores:
            for ld in _unconditional_loads(s.value):
                if ld.buffer not in written and self._vector_access(ld.buffer, ld.indices):
                    self.loads.setdefault(load_key(ld), ld)
        if not self.loads:
            return "none of its loads is a contiguous, aligned float32 access"
        return None

    def _vector_access(self, buffer: str, indices: tuple[Expr, ...]) -> bool:
        b = self.printer.buffers[buffer]
        return (b.dtype is DType.FLOAT32 and b.scope is not MemScope.LOCAL
                and index_stride(indices, self.loop.var) == 1 and _aligned(b, indices, self.loop))

    def _copy(self, s: Store) -> bool:
        """A store of a vector load into a contiguous, aligned float32 element: one float4."""
        return (s.reduction is None and isinstance(s.value, Load)
                and load_key(s.value) in self.loads and self._vector_access(s.buffer, s.indices)
                and all(ld.buffer != s.buffer for ld in self.loads.values()))

    def emit(self, w: CodeWriter) -> None:
        p, loop = self.printer, self.loop
        w.comment(f"vectorized loop '{loop.var}': {LANES} lanes, float4 loads of "
                  + ", ".join(sorted({ld.buffer for ld in self.loads.values()})))
        with w.block(""):
            fields: dict[tuple, str] = {}
            for key, ld in self.loads.items():
                name = p.names.ident(NameKind.ITERATOR, f"{ld.buffer}_vec")
                at = p.element(ld.buffer, self._lane(ld.indices, 0))
                w.statement(f"const float4 {name} = *(const float4 *)&{at}")
                fields[key] = name
            copies = [s for s in self.stores if self._copy(s)]
            for s in copies:
                assert isinstance(s.value, Load)
                at = p.element(s.buffer, self._lane(s.indices, 0))
                w.statement(f"*(float4 *)&{at} = {fields[load_key(s.value)]}")
            for lane in range(LANES):
                self._emit_lane(w, [s for s in self.stores if s not in copies], fields, lane)

    def _emit_lane(self, w: CodeWriter, stores: list[Store], fields: dict[tuple, str],
                   lane: int) -> None:
        p = self.printer
        bound: list[str] = []

        def vector_field(e: Expr) -> Expr | None:
            if isinstance(e, Load) and load_key(e) in fields:
                name = f"{fields[load_key(e)]}.{LANE_FIELDS[lane]}"
                p.bound.setdefault(name, []).append(name)
                bound.append(name)
                return Var(name, VarKind.ITER, DType.FLOAT32, False)
            return None
        try:
            for s in stores:
                value = rewrite(s.value, vector_field)
                value = substitute(value, {self.loop.var: self._lane_value(lane)})
                p.emit_store(w, Store(s.buffer, self._lane(s.indices, lane), value, s.reduction,
                                      s.statement))
        finally:
            for name in bound:
                p.bound[name].pop()

    def _lane_value(self, lane: int) -> Expr:
        return simplify(binop(BinOpKind.ADD, self.loop.start, Const(lane, DType.INT64, True)))

    def _lane(self, indices: tuple[Expr, ...], lane: int) -> tuple[Expr, ...]:
        value = self._lane_value(lane)
        return tuple(simplify(substitute(i, {self.loop.var: value})) for i in indices)


def _unconditional_loads(e: Expr) -> list[Load]:
    """The loads of ``e`` that every evaluation performs (none under a ``Select``)."""
    if isinstance(e, Load):
        return [e]
    if isinstance(e, Select):
        return _unconditional_loads(e.cond)
    return [ld for c in children(e) for ld in _unconditional_loads(c)]


def _aligned(buffer: Buffer, indices: tuple[Expr, ...], loop: For) -> bool:
    """Whether the element at the loop's start sits on a 16-byte boundary: the buffer has a
    constant shape and its row-major offset there is an affine form whose coefficients and
    constant are multiples of 4."""
    if not all(isinstance(s, Const) for s in buffer.shape):
        return False
    start = tuple(substitute(i, {loop.var: loop.start}) for i in indices)
    offset = affine(simplify(flat_index(buffer, start))) if start else {None: 0}
    return offset is not None and all(c % LANES == 0 for c in offset.values())


__all__ = ["Float4Loop"]
