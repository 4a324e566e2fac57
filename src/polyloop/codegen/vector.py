# SPDX-License-Identifier: Apache-2.0
"""Explicit vector code for a ``vectorize``d loop (C target), following a :class:`VectorPlan`.

The loop ``for j in [start, stop)`` becomes, for 16 lanes of float::

    {
        const v16f pl_bc0 = pl_broadcast_v16f(S[i]);      // invariant operands, read once
        int64_t j = start;
        for (; j <= stop - 16; j += 16) {                 // whole vectors
            pl_store_v16f(&Y[i][j], pl_load_v16f(&E[i][j]) / pl_bc0);
        }
        if (j < stop) {                                   // the rest: one masked vector (AVX-512)
            const int64_t pl_rest = stop - j;             // ... or a scalar loop elsewhere
            pl_store_masked_v16f(&Y[i][j], pl_load_masked_v16f(&E[i][j], pl_rest) / pl_bc0,
                                 pl_rest);                # (one line in the generated code)
        }
    }

A constant extent equal to the lane count is a single vector statement; a constant multiple
needs no epilogue. Where loop-invariant operands are hoisted and the loop may run zero times,
the block is guarded by ``if (start < stop)`` so that nothing is read that the loop would not read.
"""
from __future__ import annotations

from ..ir.dtypes import INDEX, DType
from ..ir.expr import (BinOp, BinOpKind, Cast, Const, Expr, Load, ReduceKind, Select, Unary,
                       UnaryKind, binop)
from ..ir.loops import For, Store
from ..ir.simplify import simplify
from .cfamily import CFamilyPrinter
from .tables import ADDITIVE, C_OPERATORS, CONDITIONAL, MULTIPLICATIVE, POSTFIX, UNARY
from .vector_lib import VecType, VectorLibrary, VectorOp
from .vector_plan import Epilogue, VectorPlan, body_stores, mentions
from .vector_conditions import VectorConditions, paren as _paren
from .vector_stream import StreamPlan, StreamScopes, plan_streams
from .writer import CodeWriter

REST = "pl_rest"      # lanes left for the epilogue; pl_ names never clash with user names
GAP = "pl_gap"        # elements before the first streamed store is on a vector boundary
HEAD_END = "pl_head_end"
_UNARY_HELPERS = {UnaryKind.ABS: VectorOp.ABS, UnaryKind.SQRT: VectorOp.SQRT,
                  UnaryKind.EXP: VectorOp.EXP, UnaryKind.SIN: VectorOp.SIN,
                  UnaryKind.COS: VectorOp.COS, UnaryKind.TAN: VectorOp.TAN,
                  UnaryKind.ERF: VectorOp.ERF, UnaryKind.LOG: VectorOp.LOG,
                  UnaryKind.TANH: VectorOp.TANH, UnaryKind.FLOOR: VectorOp.FLOOR,
                  UnaryKind.CEIL: VectorOp.CEIL, UnaryKind.ROUND: VectorOp.ROUND}
# binary operations computed by a helper of two vectors
_MINMAX = {BinOpKind.MIN: VectorOp.MIN, BinOpKind.MAX: VectorOp.MAX,
           ReduceKind.MIN: VectorOp.MIN, ReduceKind.MAX: VectorOp.MAX,
           BinOpKind.POW: VectorOp.POW, BinOpKind.FMOD: VectorOp.FMOD}


class VectorLoopWriter(VectorConditions):
    """Writes one planned vector loop through the scalar printer of its kernel."""

    def __init__(self, printer: CFamilyPrinter, lib: VectorLibrary, loop: For,
                 plan: VectorPlan, streams: StreamScopes | None = None) -> None:
        self.p, self.lib, self.loop, self.plan = printer, lib, loop, plan
        self.lanes = plan.lanes
        self.streams = streams
        self.hoisted: dict[str, tuple[str, str]] = {}   # scalar text -> (name, declaration)
        self.masked = False
        self.streaming: frozenset[int] = frozenset()   # ids of the stores written streamed
        self.shifted = False    # printing the peeled loop: no access is known to be aligned
        self.guards: list[Expr] = []    # conditions of the Select branches being printed
        self.pending: list[str] = []    # mask declarations the store being printed needs
        self.mask_names: dict[str, str] = {}
        self.mask_count = 0

    def emit(self, w: CodeWriter, var: str) -> None:
        """Write the loop, its iterator spelled ``var`` (already bound in the printer)."""
        stores = body_stores(self.loop.body) or []
        wanted = self.streams.buffers() if self.streams is not None else frozenset()
        stream = plan_streams(stores, wanted, self.plan, self.lib, self.p.buffers)
        self.streaming = stream.direct
        full = self._lines(stores)
        masked_needed = self.plan.epilogue is Epilogue.MASKED or (
            stream.anchor is not None and self._peel_epilogue() is Epilogue.MASKED)
        self.masked = True
        masked = self._lines(stores) if masked_needed else []
        self.masked = False
        streamed: list[str] = []
        if stream.anchor is not None:
            self.streaming, self.shifted = stream.direct | stream.peeled, True
            streamed = self._lines(stores)
            self.streaming, self.shifted = stream.direct, False
        p, loop, lanes, extent = self.p, self.loop, self.lanes, self.plan.extent
        start, stop = p.expr(loop.start), p.expr(loop.stop)
        w.comment(f"loop {var}: explicit vectors of {lanes} lanes "
                  f"({self.lib.isa.name}), {self._epilogue_words()}")
        for note in stream.notes:
            w.comment(note)
        self._record_streams(stores, stream)
        guard = self.hoisted and not (extent is not None and extent > 0)
        with w.block(f"if ({start} < {stop})" if guard else ""):
            for _, declaration in self.hoisted.values():
                w.statement(declaration)
            if stream.anchor is not None:
                self._emit_peeled(w, var, stream.anchor, full, masked, streamed)
                return
            if extent == lanes:
                w.statement(f"const int64_t {var} = {start}")
                w.lines(f"{s};" for s in full)
                return
            if self.plan.epilogue is Epilogue.NONE:
                with w.block(f"for (int64_t {var} = {start}; {var} < {stop}; {var} += {lanes})"):
                    w.lines(f"{s};" for s in full)
                return
            w.statement(f"int64_t {var} = {start}")
            if extent is None or extent >= lanes:
                with w.block(f"for (; {var} <= {self._last()}; {var} += {lanes})"):
                    w.lines(f"{s};" for s in full)
            self._emit_epilogue(w, var, stop, masked)

    def _lines(self, stores: list[Store]) -> list[str]:
        return [line for s in stores for line in self.store(s)]

    def _last(self) -> str:
        """The last start of a whole vector: ``stop - lanes``."""
        stop = simplify(binop(BinOpKind.SUB, self.loop.stop, Const(self.lanes, INDEX, True)))
        return self.p.expr(stop)

    def _peel_epilogue(self) -> Epilogue:
        """The head and the remainder of a peeled loop: masked where the ISA allows."""
        return Epilogue.MASKED if self.plan.maskable else Epilogue.SCALAR

    def _record_streams(self, stores: list[Store], stream: StreamPlan) -> None:
        if self.streams is not None:
            for s in stores:
                if id(s) in stream.direct | stream.peeled:
                    self.streams.streamed(s.buffer)

    def _emit_peeled(self, w: CodeWriter, var: str, anchor: Store, full: list[str],
                     masked: list[str], streamed: list[str]) -> None:
        """Head until the anchor store is on a vector boundary, whole streamed vectors, then an
        ordinary vector loop (it runs only where the array is not aligned to its element) and
        the remainder."""
        p, lanes = self.p, self.lanes
        stop, last = p.expr(self.loop.stop), self._last()
        t = self.vtype(p.buffers[anchor.buffer].dtype)
        w.statement(f"int64_t {var} = {p.expr(self.loop.start)}")
        address = "&" + p.element(anchor.buffer, anchor.indices)
        with w.block(""):
            w.statement(f"const int64_t {GAP} = {self.lib.use(VectorOp.ALIGN_GAP, t)}({address})")
            with w.block(f"if ({GAP} >= 0)"):
                head = f"({GAP} < {stop} - {var} ? {GAP} : {stop} - {var})"
                if self._peel_epilogue() is Epilogue.MASKED:
                    with w.block(f"if ({GAP} > 0)"):
                        w.statement(f"const int64_t {REST} = {head}")
                        w.lines(f"{s};" for s in masked)
                        w.statement(f"{var} += {REST}")
                else:
                    w.statement(f"const int64_t {HEAD_END} = {var} + {head}")
                    with w.block(f"for (; {var} < {HEAD_END}; {var}++)"):
                        p.emit(w, self.loop.body)
                with w.block(f"for (; {var} <= {last}; {var} += {lanes})"):
                    w.lines(f"{s};" for s in streamed)
        with w.block(f"for (; {var} <= {last}; {var} += {lanes})"):
            w.lines(f"{s};" for s in full)
        if self._peel_epilogue() is Epilogue.SCALAR:
            with w.block(f"for (; {var} < {stop}; {var}++)"):
                p.emit(w, self.loop.body)
            return
        with w.block(f"if ({var} < {stop})"):
            w.statement(f"const int64_t {REST} = {stop} - {var}")
            w.lines(f"{s};" for s in masked)

    def _epilogue_words(self) -> str:
        return {Epilogue.NONE: "no remainder", Epilogue.MASKED: "masked remainder",
                Epilogue.SCALAR: "scalar remainder loop"}[self.plan.epilogue]

    def _emit_epilogue(self, w: CodeWriter, var: str, stop: str, masked: list[str]) -> None:
        if self.plan.epilogue is Epilogue.SCALAR:
            with w.block(f"for (; {var} < {stop}; {var}++)"):
                self.p.emit(w, self.loop.body)
            return
        extent = self.plan.extent
        if extent is not None:   # a constant remainder: no test needed
            with w.block(""):
                w.statement(f"const int64_t {REST} = {extent % self.lanes}")
                w.lines(f"{s};" for s in masked)
            return
        with w.block(f"if ({var} < {stop})"):
            w.statement(f"const int64_t {REST} = {stop} - {var}")
            w.lines(f"{s};" for s in masked)

    # stores and loads ----------------------------------------------------------------------------
    def vtype(self, dtype: DType) -> VecType:
        t = VecType(dtype, self.lanes)
        self.lib.type(t)
        return t

    def store(self, s: Store) -> list[str]:
        """The statements of one vector store: the masks it needs, then the store."""
        self.pending, self.mask_names = [], {}
        text = self._store(s)
        return [*self.pending, text]

    def _store(self, s: Store) -> str:
        t = self.vtype(self.p.buffers[s.buffer].dtype)
        operand = self._value(s.value)
        value = operand[0]
        if s.reduction is not None:
            old = self._load(s.buffer, s.indices, t, id(s))
            if s.reduction is ReduceKind.SUM:
                value = f"{old} + {_paren(operand, ADDITIVE + 1)}"
            elif s.reduction is ReduceKind.PROD:
                value = f"{old} * {_paren(operand, MULTIPLICATIVE + 1)}"
            else:
                value = f"{self.lib.use(_MINMAX[s.reduction], t)}({old}, {value})"
        address = "&" + self.p.element(s.buffer, s.indices)
        if self.masked:
            return f"{self.lib.use(VectorOp.STORE_MASKED, t)}({address}, {value}, {REST})"
        if id(s) in self.streaming:
            return f"{self.lib.use(VectorOp.STORE_STREAM, t)}({address}, {value})"
        op = VectorOp.STORE_ALIGNED if self._aligned(id(s)) else VectorOp.STORE
        return f"{self.lib.use(op, t)}({address}, {value})"

    def _aligned(self, key: int) -> bool:
        return key in self.plan.aligned and not self.shifted

    def _load(self, buffer: str, indices: tuple[Expr, ...], t: VecType, key: int) -> str:
        address = "&" + self.p.element(buffer, indices)
        if self.masked:
            return f"{self.lib.use(VectorOp.LOAD_MASKED, t)}({address}, {REST})"
        op = VectorOp.LOAD_ALIGNED if self._aligned(key) else VectorOp.LOAD
        return f"{self.lib.use(op, t)}({address})"

    # values ------------------------------------------------------------------------------------
    def value(self, e: Expr) -> str:
        """``e`` as a vector of ``lanes`` elements of ``e.dtype``."""
        return self._value(e)[0]

    def _value(self, e: Expr) -> tuple[str, int]:
        var = self.loop.var
        if not mentions(e, var):
            return self._broadcast(e), POSTFIX
        t = self.vtype(e.dtype)
        if isinstance(e, Load) and id(e) in self.plan.guarded:
            return self._guarded_load(e, t), POSTFIX
        if isinstance(e, Load):
            return self._load(e.buffer, e.indices, t, id(e)), POSTFIX
        if isinstance(e, BinOp) and e.op is BinOpKind.POW and isinstance(e.rhs, Const) \
                and e.rhs.value == 2:
            # x * x is pow(x, 2) exactly (one rounding), as gcc folds it in scalar code
            x = _paren(self._value(e.lhs), MULTIPLICATIVE + 1)
            return f"{x} * {x}", MULTIPLICATIVE
        if isinstance(e, BinOp) and e.op in _MINMAX:
            return f"{self.lib.use(_MINMAX[e.op], t)}({self.value(e.lhs)}, {self.value(e.rhs)})", \
                POSTFIX
        if isinstance(e, BinOp):
            symbol, prec = C_OPERATORS[e.op]
            lhs = _paren(self._operand(e.lhs), prec)
            rhs = _paren(self._operand(e.rhs), prec + 1)
            return f"{lhs} {symbol} {rhs}", prec
        if isinstance(e, Unary) and e.op is UnaryKind.NEG:
            return "-" + _paren(self._value(e.operand), POSTFIX), UNARY
        if isinstance(e, Unary):
            return f"{self.lib.use(_UNARY_HELPERS[e.op], t)}({self.value(e.operand)})", POSTFIX
        if isinstance(e, Cast):
            return f"__builtin_convertvector({self.value(e.value)}, {t.name})", POSTFIX
        if isinstance(e, Select) and not mentions(e.cond, var):
            # the same condition in every lane: C's ?: evaluates only the branch taken, so a
            # load the condition guards (where(i > 0, A[i - 1, j], 0)) is never read outside
            cond = f"({self.p.expr(e.cond)})"
            return (f"{cond} ? {_paren(self._value(e.true_value), CONDITIONAL + 1)} : "
                    f"{_paren(self._value(e.false_value), CONDITIONAL + 1)}"), CONDITIONAL
        if isinstance(e, Select):
            bits = self.bit_mask(e.cond)
            if bits is not None and self._zero_else_load(e):
                # a zero-masking load already holds 0 where the condition fails: no blend
                return self._branch(e.true_value, e.cond), POSTFIX
            if bits is not None:
                mask, helper = self._named_bits(bits), self.lib.use(VectorOp.SELECT_BITS, t)
            else:
                mask = self._named(self.mask(e.cond, t.mask), t.mask)
                helper = self.lib.use(VectorOp.SELECT, t)
            if_true = self._branch(e.true_value, e.cond)
            if_false = self._branch(e.false_value, Unary(UnaryKind.NOT, e.cond, DType.BOOL))
            return f"{helper}({mask}, {if_true}, {if_false})", POSTFIX
        raise AssertionError(f"the plan admitted {e}, which has no vector form")

    def _zero_else_load(self, e: Select) -> bool:
        """``where(cond, load, 0)`` with the load guarded by ``cond`` (padding read in place)."""
        other, load = e.false_value, e.true_value
        return (isinstance(other, Const) and other.value == 0 and isinstance(load, Load)
                and id(load) in self.plan.guarded and mentions(load, self.loop.var))

    def _branch(self, e: Expr, condition: Expr) -> str:
        """A branch of a select; its guarded loads read only the lanes where it is taken."""
        self.guards.append(condition)
        try:
            return self.value(e)
        finally:
            self.guards.pop()

    def _guarded_load(self, e: Load, t: VecType) -> str:
        condition = self.guards[0]
        for g in self.guards[1:]:
            condition = BinOp(BinOpKind.AND, condition, g, DType.BOOL)
        address = "&" + self.p.element(e.buffer, e.indices)
        bits = self.bit_mask(condition)
        if bits is not None:
            mask = self._named_bits(bits)
            if self.masked:
                mask = f"{mask} & {self._lanes_below(REST)}"
            return f"{self.lib.use(VectorOp.LOAD_WHERE_BITS, t)}({address}, {mask})"
        mask = self._named(self.mask(condition, t.mask), t.mask)
        if self.masked:
            return f"{self.lib.use(VectorOp.LOAD_WHERE_MASKED, t)}({address}, {mask}, {REST})"
        return f"{self.lib.use(VectorOp.LOAD_WHERE, t)}({address}, {mask})"

    def _named(self, mask: str, mt: VecType) -> str:
        """A compound mask gets a name of its own, declared before the store that uses it."""
        if mask.startswith("pl_bc") and mask[5:].isdigit():
            return mask
        return self._declared(mask, "pl_m", mt.name)

    def _declared(self, value: str, prefix: str, ctype: str) -> str:
        """The name of a ``const ctype`` declared once (before the store) to hold ``value``."""
        if value not in self.mask_names:
            name = f"{prefix}{self.mask_count}"
            self.mask_count += 1
            self.mask_names[value] = name
            self.pending.append(f"const {ctype} {name} = {value}")
        return self.mask_names[value]

    def _operand(self, e: Expr) -> tuple[str, int]:
        """An operand of a vector operator: gcc broadcasts a scalar constant by itself."""
        if isinstance(e, Const):
            return self.p.literal(e)
        return self._value(e)

    def _broadcast(self, e: Expr) -> str:
        """A loop-invariant value, computed once before the loop and broadcast."""
        return self._hoist(self.p.expr(e), self.vtype(e.dtype))

    def _hoist(self, scalar: str, t: VecType) -> str:
        key = f"{t.name}:{scalar}"
        if key not in self.hoisted:
            name = f"pl_bc{len(self.hoisted)}"
            helper = self.lib.use(VectorOp.BROADCAST, t)
            self.hoisted[key] = (name, f"const {t.name} {name} = {helper}({scalar})")
        return self.hoisted[key][0]
