# SPDX-License-Identifier: Apache-2.0
"""Conditions in vector code: as lane masks (integer vectors, -1 where a lane holds) or, with
AVX-512's mask registers, as scalar lane bit masks computed from the loop index alone.

:class:`VectorConditions` is mixed into the vector loop writer (``vector.py``), whose values,
hoisted invariants and named temporaries it uses.
"""
from __future__ import annotations

from ..ir.dtypes import DType
from ..ir.expr import BinOp, BinOpKind, Expr, Unary, UnaryKind, binop
from ..ir.simplify import simplify
from .flatten import Wrap
from .tables import C_OPERATORS, MULTIPLICATIVE
from .vector_lib import VecType, VectorOp
from .vector_plan import lane_condition, mentions, wrapped_condition

_MASK_OPS = {BinOpKind.AND: "&", BinOpKind.OR: "|"}
_MIRRORED = {BinOpKind.LT: BinOpKind.GT, BinOpKind.LE: BinOpKind.GE, BinOpKind.GT: BinOpKind.LT,
             BinOpKind.GE: BinOpKind.LE, BinOpKind.EQ: BinOpKind.EQ, BinOpKind.NE: BinOpKind.NE}


class VectorConditions:
    """The condition half of the vector loop writer."""

    def bit_mask(self, e: Expr) -> str | None:
        """Condition ``e`` as a scalar lane bit mask (bit ``l`` set where lane ``l`` holds),
        for AVX-512's mask registers: a few integer instructions instead of vector compares.
        None where ``e`` compares vector values, or the loop's vectors have no mask registers."""
        if not self.plan.maskable:
            return None
        every = f"{(1 << self.lanes) - 1}u"
        if not mentions(e, self.loop.var):
            return f"(({self.p.expr(e)}) ? {every} : 0u)"
        if isinstance(e, BinOp) and e.op in _MASK_OPS:
            parts = [self.bit_mask(x) for x in (e.lhs, e.rhs)]
            if None in parts:
                return None
            return f"({parts[0]} {_MASK_OPS[e.op]} {parts[1]})"
        if isinstance(e, Unary) and e.op is UnaryKind.NOT:
            inner = self.bit_mask(e.operand)
            return None if inner is None else f"(~{inner} & {every})"
        if not (isinstance(e, BinOp) and e.op.is_comparison):
            return None
        step = lane_condition(e, self.loop.var)
        wrap = wrapped_condition(e, self.loop.var) if step is None else None
        if step not in (1, -1) and wrap is None:
            return None
        d = self.p.index_expr(simplify(binop(BinOpKind.SUB, e.lhs, e.rhs)))
        return self._step_bits(e.op, d, step) if wrap is None else \
            self._wrapped_bits(e.op, d, wrap)

    def _wrapped_bits(self, op: BinOpKind, d: str, wrap: Wrap) -> str:
        """The lanes of a condition on a fused index's quotient or remainder: two pieces, before
        and after the lane ``r`` where the remainder wraps (``codegen.flatten.Wrap``)."""
        every = f"{(1 << self.lanes) - 1}u"
        rest = self.p.index_expr(binop(BinOpKind.MOD, wrap.numerator, wrap.divisor),
                                 MULTIPLICATIVE)
        wrapped = self._named_bits(self._lanes_below(f"{wrap.divisor} - {rest}"))
        before = self._step_bits(op, d, wrap.step)
        jump = "" if not wrap.jump else f" {'+' if wrap.jump > 0 else '-'} {abs(wrap.jump)}"
        after = self._step_bits(op, f"{d}{jump}", wrap.step)
        return f"(({before} & {wrapped}) | ({after} & ~{wrapped} & {every}))"

    def _step_bits(self, op: BinOpKind, d: str, step: int) -> str:
        """The lanes ``l`` where ``d + step * l CMP 0`` holds, ``step`` in -1, 0, 1."""
        every = f"{(1 << self.lanes) - 1}u"
        if step == 0:
            return f"(({d}) {C_OPERATORS[op][0]} 0 ? {every} : 0u)"
        # lane l holds where d + step * l CMP 0; with m = -d (step 1): l CMP m
        if step == -1:     # d - l CMP 0  <=>  l CMP' d, the comparison mirrored
            op, m = _MIRRORED[op], f"({d})"
        else:
            m = f"-({d})"
        below, below_next = self._lanes_below(m), self._lanes_below(f"{m} + 1")
        return {BinOpKind.LT: below, BinOpKind.LE: below_next,
                BinOpKind.GE: f"({every} & ~{below})", BinOpKind.GT: f"({every} & ~{below_next})",
                BinOpKind.EQ: f"({below_next} & ~{below})",
                BinOpKind.NE: f"({every} & ~({below_next} & ~{below}))"}[op]

    def _lanes_below(self, n: str) -> str:
        """Bits of the lanes ``l < n`` (n clamped to [0, lanes])."""
        return f"{self.lib.use(VectorOp.LANES_BELOW, VecType(DType.INT32, self.lanes))}({n})"

    def _named_bits(self, bits: str) -> str:
        return self._declared(bits, "pl_k", "uint32_t")

    def mask(self, e: Expr, mt: VecType) -> str:
        """Condition ``e`` as an integer vector of type ``mt``: -1 where true, 0 where false."""
        self.lib.type(mt)
        if not mentions(e, self.loop.var):
            element = mt.element
            return self._hoist(f"({element})-({self.p.expr(e)})", mt)
        if isinstance(e, BinOp) and e.op in _MASK_OPS:
            parts = [self.mask(x, mt) for x in (e.lhs, e.rhs)]
            return f"({parts[0]} {_MASK_OPS[e.op]} {parts[1]})"
        if isinstance(e, Unary) and e.op is UnaryKind.NOT:
            return f"~{self.mask(e.operand, mt)}"
        if isinstance(e, Unary) and e.op is UnaryKind.ISNAN:  # the one value unequal to itself
            return self.mask(BinOp(BinOpKind.NE, e.operand, e.operand, DType.BOOL), mt)
        assert isinstance(e, BinOp) and e.op.is_comparison, e
        step = lane_condition(e, self.loop.var)
        if step is not None:
            return self._lane_mask(e, step, mt)
        operand_type = self.vtype(e.lhs.dtype)
        symbol, _ = C_OPERATORS[e.op]
        compare = f"{paren(self._operand(e.lhs), MULTIPLICATIVE)} {symbol} " \
                  f"{paren(self._operand(e.rhs), MULTIPLICATIVE)}"
        own = self.vtype(operand_type.mask.dtype)
        if own == mt:
            return f"({mt.name})({compare})"
        return f"__builtin_convertvector(({own.name})({compare}), {mt.name})"

    def _lane_mask(self, e: BinOp, step: int, mt: VecType) -> str:
        """``lhs CMP rhs`` on integer indices: lane ``l`` compares ``d + step * l`` with 0,
        ``d`` the difference at lane 0 (the loop variable holds lane 0's value)."""
        symbol, _ = C_OPERATORS[e.op]
        d = self.p.expr(simplify(binop(BinOpKind.SUB, e.lhs, e.rhs)))
        offset = f"{self.lib.use(VectorOp.LANE_OFFSET, mt)}({d})"
        lanes = f"{self.lib.use(VectorOp.IOTA, mt)}()"
        if step == 0:
            lanes = offset
        elif step == 1:
            lanes = f"{lanes} + {offset}"
        else:
            lanes = f"{lanes} * {step} + {offset}"
        return f"({mt.name})({lanes} {symbol} 0)"


def paren(operand: tuple[str, int], min_prec: int) -> str:
    text, prec = operand
    return f"({text})" if prec < min_prec else text
