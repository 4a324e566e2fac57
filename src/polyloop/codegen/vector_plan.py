# SPDX-License-Identifier: Apache-2.0
"""Which vectorized loops become explicit vector code, with how many lanes, and why not.

A ``vectorize``d loop (its legality already proven: no dependence is carried by it) is written
as explicit vector code when its body is a list of stores and every access is, in the loop
variable ``j``:

- *invariant*: no index mentions ``j``; the value is read once before the loop and broadcast;
- *contiguous*: the last index is ``j + (terms without j)``, the others do not mention ``j``;
  lane ``l`` touches the element after lane ``l - 1``: one vector load or store.

Conditions may compare index expressions affine in ``j`` (``j + 16 * j0 >= 1``: a padding
border); each lane then compares its own index. A load read only under a condition on ``j``
(``where(j >= 1, A[j - 1], 0)``) is read with the condition as an AVX-512 mask, so that no lane
reads what the scalar loop would not; without AVX-512 such a loop is left to gcc.

Anything else (a stride other than 1, an index that is not affine in ``j``, ``j`` used as a
value, a math function without a vector form, a buffer read and written at different elements)
leaves the loop to gcc: unrolled when it is short (``short_scalar_loop``), else under
``#pragma omp simd``; :func:`plan_vector_loop` says why. The
index analysis (strides, conditions per lane) is in ``vector_index.py``.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import Iterator, Mapping

from ..ir.dtypes import DType
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, Select, Unary, UnaryKind, Var,
                       VarKind, same, walk)
from ..ir.loops import Block, For, LoopKind, Node, Store
from ..ir.program import Buffer, BufferRole, MemScope
from ..util.isa import ISA
from .flatten import Wrap
from .index_checks import needs_check
from .vector_index import (Affine, added, affine, index_stride, lane_condition, load_key,
                           mentions, scaled, wrapped_condition)

__all__ = ["Epilogue", "NotVectorized", "VectorPlan", "affine", "body_stores", "choose_lanes",
           "index_stride", "lane_condition", "load_key", "masked_epilogue_available",
           "mentions", "plan_vector_loop", "proven_aligned", "short_scalar_loop", "simd_accumulation",
           "wrapped_condition"]

MIN_VECTOR_BYTES = 16          # the narrowest vector register of any ISA we target
ALIGNED_TEMP_BYTES = 64        # every temporary is declared or allocated 64-byte aligned
VECTOR_DTYPES = (DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64)
VECTOR_BINOPS = frozenset({BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL, BinOpKind.DIV,
                           BinOpKind.MIN, BinOpKind.MAX, BinOpKind.LT, BinOpKind.LE,
                           BinOpKind.GT, BinOpKind.GE, BinOpKind.EQ, BinOpKind.NE,
                           BinOpKind.AND, BinOpKind.OR, BinOpKind.POW, BinOpKind.FMOD})
VECTOR_FLOAT_UNARY = frozenset({UnaryKind.NEG, UnaryKind.ABS, UnaryKind.SQRT, UnaryKind.EXP,
                                UnaryKind.SIN, UnaryKind.COS, UnaryKind.TAN, UnaryKind.ERF,
                                UnaryKind.LOG, UnaryKind.TANH, UnaryKind.FLOOR, UnaryKind.CEIL,
                                UnaryKind.ROUND})
VECTOR_INT_UNARY = frozenset({UnaryKind.NEG, UnaryKind.ABS})
MAX_SCALAR_UNROLL = 16         # a vectorized loop left to gcc is unrolled up to this trip count



class Epilogue(enum.Enum):
    NONE = "none"          # the extent is a constant multiple of the lane count
    MASKED = "masked"      # one AVX-512 masked iteration
    SCALAR = "scalar"      # a scalar remainder loop


@dataclass(frozen=True, slots=True)
class VectorPlan:
    """How one loop is vectorized: ``lanes`` elements per vector, the epilogue, the
    contiguous accesses (by ``id`` of their Load or Store) proven to be vector-aligned, and
    the loads that only lanes whose condition holds may read."""
    lanes: int
    epilogue: Epilogue
    aligned: frozenset[int]
    extent: int | None          # the constant trip count, if there is one
    guarded: frozenset[int] = frozenset()   # loads read under a lane condition: masked
    maskable: bool = False      # the ISA masks this loop's vectors (a masked head or remainder)


@dataclass(frozen=True, slots=True)
class NotVectorized:
    """Why a loop stays a scalar loop under ``#pragma omp simd``."""
    reason: str


def plan_vector_loop(loop: For, buffers: Mapping[str, Buffer], isa: ISA,
                     has_local_temps: bool = False) -> VectorPlan | NotVectorized:
    """The vector plan of a VECTORIZED loop, or the reason it is left to the C compiler."""
    if loop.step != 1:
        return NotVectorized(f"its step is {loop.step}")
    if has_local_temps:
        return NotVectorized("it declares private temporaries")
    stores = body_stores(loop.body)
    if stores is None:
        return NotVectorized("its body holds loops or conditions, not only stores")
    unknown = {s.buffer for s in stores} | {ld.buffer for s in stores for ld in _loads(s.value)}
    if unknown - set(buffers):
        return NotVectorized(f"it accesses unknown buffers {sorted(unknown - set(buffers))}")
    checked = [b for b, ix in ((s.buffer, s.indices) for s in stores) if needs_check(ix)] + \
        [ld.buffer for s in stores for ld in _loads(s.value) if needs_check(ld.indices)]
    if checked:
        return NotVectorized(f"its index into {checked[0]} is checked at run time")
    check = _BodyCheck(loop.var, {name: b.shape for name, b in buffers.items()})
    for s in stores:
        reason = _check_store(s, loop.var, buffers, check)
        if reason:
            return NotVectorized(reason)
    reason = _check_conflicts(stores)
    if reason:
        return NotVectorized(reason)
    dtypes = check.dtypes
    extent = _constant_extent(loop)
    lanes = choose_lanes(dtypes, isa, extent)
    if lanes < 2:
        return NotVectorized(f"{isa.name} vectors hold a single element of this loop's type")
    guarded = check.guarded_loads()
    for ld in guarded:
        if not mentions(ld, loop.var):
            return NotVectorized(f"it reads {ld.buffer} only under a condition on "
                                 f"'{loop.var}', and would read it before the loop")
    if guarded and not masked_epilogue_available(isa, dtypes, lanes):
        return NotVectorized(f"it reads {guarded[0].buffer} only under a condition on "
                             f"'{loop.var}', which needs AVX-512 masked loads")
    maskable = masked_epilogue_available(isa, dtypes, lanes)
    reason = _check_wraps(check.wraps, lanes, maskable)
    if reason:
        return NotVectorized(reason)
    if extent is not None and extent % lanes == 0:
        epilogue = Epilogue.NONE
    elif maskable:
        epilogue = Epilogue.MASKED
    else:
        epilogue = Epilogue.SCALAR
    aligned = frozenset(id(node) for node, indices in _contiguous_accesses(stores, loop.var)
                        if proven_aligned(indices, buffers[_buffer_of(node)], loop, lanes))
    return VectorPlan(lanes, epilogue, aligned, extent, frozenset(id(ld) for ld in guarded),
                      maskable)


# the longest serial loop over a loop-local tile that is left to the C compiler's vectorizer
MAX_SIMD_TILE = 64


def simd_accumulation(loop: For, buffers: Mapping[str, Buffer], isa: ISA) -> bool:
    """Is ``loop`` a serial innermost loop of constant trip count (at most ``MAX_SIMD_TILE``)
    that updates a loop-local tile (a temporary of scope 'local': a stage sized to its loop)
    and whose iterations are independent (every access would be vector code: each iteration
    writes its own elements and reads nothing another writes)? Such a loop is the row of an
    accumulator tile, which the C compiler's vectorizer keeps in a vector register when the
    loop is left a loop (not unrolled first)."""
    stores = body_stores(loop.body)
    if loop.kind is not LoopKind.SERIAL or not stores or not isinstance(loop.start, Const) \
            or not isinstance(loop.stop, Const):
        return False
    if loop.stop.value - loop.start.value > MAX_SIMD_TILE:
        return False
    if not any(s.buffer in buffers and buffers[s.buffer].scope is MemScope.LOCAL for s in stores):
        return False
    as_vector = replace(loop, kind=LoopKind.VECTORIZED)
    return isinstance(plan_vector_loop(as_vector, buffers, isa), VectorPlan)


def short_scalar_loop(loop: For) -> int | None:
    """The trip count of a vectorized loop short enough (at most ``MAX_SCALAR_UNROLL``
    iterations, a constant) to be unrolled when it cannot be explicit vector code, or None.

    Unrolled, each iteration's indices are constants apart (the 2 x 2 pixels of a fused and
    vectorized ``(y, x)``: offsets 0, 1, 28, 29), which the C compiler addresses directly and
    its straight-line vectorizer packs where it can; under ``#pragma omp simd`` it computes the
    quotients and conditions per lane and gathers (measured 3.7x slower on the MLC course's
    conv2d).
    """
    if not (isinstance(loop.start, Const) and isinstance(loop.stop, Const)):
        return None
    n = loop.stop.value - loop.start.value
    return n if 0 < n <= MAX_SCALAR_UNROLL and loop.step == 1 else None


def body_stores(body: Node) -> list[Store] | None:
    """The stores of a body made only of stores and blocks, in order; None otherwise."""
    if isinstance(body, Store):
        return [body]
    if isinstance(body, Block):
        out: list[Store] = []
        for child in body.body:
            inner = body_stores(child)
            if inner is None:
                return None
            out.extend(inner)
        return out
    return None


def _check_store(s: Store, var: str, buffers: Mapping[str, Buffer], check: _BodyCheck
                 ) -> str | None:
    dtype = buffers[s.buffer].dtype
    if dtype not in VECTOR_DTYPES:
        return f"it stores {dtype} values"
    stride = index_stride(s.indices, var, buffers[s.buffer].shape)
    if stride != 1:
        what = "the same element on every iteration" if stride == 0 else \
            "non-contiguous elements"
        return f"it stores {s.buffer} at {what}"
    check.dtypes.add(dtype)
    return check.value(s.value, guarded=False)


def _check_wraps(wraps: list[Wrap], lanes: int, maskable: bool) -> str | None:
    if not wraps:
        return None
    if not maskable:
        return ("a condition depends on a quotient or remainder of the loop index, which "
                "needs AVX-512 mask registers")
    small = min(w.divisor for w in wraps)
    if small < lanes:
        return (f"a condition depends on a remainder by {small}, which wraps more than once "
                f"in a vector of {lanes} lanes")
    return None


class _BodyCheck:
    """Walks the values of a loop body: the dtypes it computes in, and which loads happen
    only under a condition that depends on the loop variable (a vector loop must not read
    them unmasked: ``where(j >= 1, A[j - 1], 0)`` never reads ``A[-1]``)."""

    def __init__(self, var: str, shapes: Mapping[str, tuple[Expr, ...]] | None = None) -> None:
        self.var = var
        self.shapes = shapes or {}
        self.dtypes: set[DType] = set()
        self.unconditional: set[tuple[str, tuple[str, ...]]] = set()
        self.conditional: list[Load] = []
        self.wraps: list[Wrap] = []     # conditions on a fused index's quotient or remainder

    def value(self, e: Expr, *, guarded: bool) -> str | None:
        """None when every node of ``e`` that depends on ``var`` has a vector form."""
        var = self.var
        if not mentions(e, var):
            self._loads(e, guarded)
            return None     # invariant: computed once as a scalar, then broadcast
        if e.dtype is not DType.BOOL and lane_condition(e, var) is None:
            if e.dtype not in VECTOR_DTYPES:
                return f"it computes {e.dtype} values"
            self.dtypes.add(e.dtype)
        if isinstance(e, Var):
            return f"it uses loop variable '{var}' as a value"
        if isinstance(e, Load):
            if e.dtype not in VECTOR_DTYPES:
                return f"it reads {e.dtype} values"
            self._loads(e, guarded)
            return None if index_stride(e.indices, var, self.shapes.get(e.buffer)) == 1 else \
                f"it reads {e.buffer} at non-contiguous elements (a stride other than 1)"
        if isinstance(e, BinOp):
            if e.op not in VECTOR_BINOPS:
                return f"'{e.op.value}' has no vector form here"
            if lane_condition(e, var) is not None:
                return None
            wrap = wrapped_condition(e, var)
            if wrap is not None:
                if wrap.step not in (-1, 0, 1):
                    return (f"a condition steps by {wrap.step} per lane through a quotient or "
                            "remainder of the loop index")
                self.wraps.append(wrap)
                return None
            if e.op.is_comparison and e.lhs.dtype is DType.BOOL:
                return "it compares conditions"
            return self.value(e.lhs, guarded=guarded) or self.value(e.rhs, guarded=guarded)
        if isinstance(e, Unary):
            allowed = VECTOR_FLOAT_UNARY if e.dtype.is_float else VECTOR_INT_UNARY
            if e.op in (UnaryKind.NOT, UnaryKind.ISNAN) or e.op in allowed:
                return self.value(e.operand, guarded=guarded)
            return f"'{e.op.value}' of {e.dtype} has no vector form here"
        if isinstance(e, Cast):
            if e.dtype is DType.BOOL or e.value.dtype is DType.BOOL:
                return "it casts to or from bool"
            return self.value(e.value, guarded=guarded)
        if isinstance(e, Select):
            inner = guarded or mentions(e.cond, var)
            return (self.value(e.cond, guarded=guarded)
                    or self.value(e.true_value, guarded=inner)
                    or self.value(e.false_value, guarded=inner))
        return f"{type(e).__name__} has no vector form"

    def _loads(self, e: Expr, guarded: bool) -> None:
        for ld in _loads(e):
            if guarded:
                self.conditional.append(ld)
            else:
                self.unconditional.add(load_key(ld))

    def guarded_loads(self) -> list[Load]:
        """Loads read only under a lane-dependent condition (not also read without one)."""
        return [ld for ld in self.conditional if load_key(ld) not in self.unconditional]


def _check_conflicts(stores: list[Store]) -> str | None:
    """A buffer written in the loop is accessed at one element per iteration only: a lane
    never reads what another lane writes, and nothing written is hoisted as invariant."""
    written: dict[str, tuple[Expr, ...]] = {}
    for s in stores:
        written.setdefault(s.buffer, s.indices)
    for s in stores:
        accesses = [(s.buffer, s.indices)] + [(ld.buffer, ld.indices) for ld in _loads(s.value)]
        for name, indices in accesses:
            if name in written and not all(same(a, b) for a, b in zip(indices, written[name])):
                return f"it reads or writes {name} at different elements"
    return None


def _loads(e: Expr) -> Iterator[Load]:
    return (n for n in walk(e) if isinstance(n, Load))


def _constant_extent(loop: For) -> int | None:
    a, b = affine(loop.start), affine(loop.stop)
    if a is None or b is None:
        return None
    diff = added(b, scaled(a, -1))
    if any(c for key, c in diff.items() if key is not None):
        return None
    return max(0, diff.get(None, 0))


def choose_lanes(dtypes: set[DType], isa: ISA, extent: int | None) -> int:
    """One lane count for the whole loop: the widest type fills a vector register; a short
    constant loop gets a narrower vector (at least 16 bytes of the narrowest type)."""
    if not dtypes:
        return 0
    widest = max(d.itemsize for d in dtypes)
    narrowest = min(d.itemsize for d in dtypes)
    lanes = isa.vector_bytes // widest
    if extent is not None and extent < lanes:
        fits = 1 << max(0, math.ceil(math.log2(max(extent, 1))))
        lanes = min(lanes, max(fits, MIN_VECTOR_BYTES // narrowest))
    return lanes


def masked_epilogue_available(isa: ISA, dtypes: set[DType], lanes: int) -> bool:
    """AVX-512 masks loads and stores of 64-byte vectors, and of 16/32-byte ones with VL."""
    if isa.name != "avx512":
        return False
    sizes = {lanes * d.itemsize for d in dtypes}
    return sizes <= {64} or (sizes <= {16, 32, 64} and isa.has("__AVX512VL__"))


def _buffer_of(node: Load | Store) -> str:
    return node.buffer


def _contiguous_accesses(stores: list[Store], var: str
                         ) -> Iterator[tuple[Load | Store, tuple[Expr, ...]]]:
    for s in stores:
        yield s, s.indices
        for ld in _loads(s.value):
            if index_stride(ld.indices, var) == 1:
                yield ld, ld.indices


def proven_aligned(indices: tuple[Expr, ...], buffer: Buffer, loop: For, lanes: int) -> bool:
    """Whether the element at ``loop.start`` (and so at every ``start + lanes * t``) sits on a
    vector boundary: a temporary (64-byte aligned) of constant shape whose linear offset at the
    start is an affine form with every coefficient a multiple of the lane count."""
    vector_bytes = lanes * buffer.dtype.itemsize
    if buffer.role is not BufferRole.TEMP or ALIGNED_TEMP_BYTES % vector_bytes:
        return False
    if not all(isinstance(s, Const) for s in buffer.shape):
        return False
    start = affine(loop.start)
    if start is None:
        return False
    offset: Affine = {}
    stride = 1
    for index, size in zip(reversed(indices), reversed(buffer.shape)):
        form = affine(index)
        if form is None:
            return False
        coefficient = form.pop((loop.var, VarKind.ITER), 0)
        form = added(form, scaled(start, coefficient))
        offset = added(offset, scaled(form, stride))
        stride *= int(size.value)   # type: ignore[attr-defined]
    return all(c % lanes == 0 for c in offset.values())
