# SPDX-License-Identifier: Apache-2.0
"""The performance targets of `polyloop bench` as data: each a list of minimum ratios, judged on one measured row.

A ratio "vs torch" is the reference's time divided by polyloop's (> 1: polyloop is faster);
``peak`` is the fraction of the measured FMA peak, ``triad`` the fraction of the measured triad
bandwidth. A goal is met when every criterion is; it is unknown when a needed figure is missing
(the reference is not installed, or polyloop has no schedule yet).

>>> goal = at_least(torch=0.9, peak=0.8)
>>> goal.text()
'>= 0.9x torch, >= 80% peak'
>>> goal.judge(ratios={"torch": 0.95}, peak=0.85, triad=None)
True
>>> goal.judge(ratios={}, peak=0.85, triad=None) is None
True
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Criterion:
    """``what`` (a reference name, "peak" or "triad") must reach ``minimum``."""

    what: str
    minimum: float

    def text(self) -> str:
        if self.what in ("peak", "triad"):
            return f">= {self.minimum:.0%} {self.what}"
        return f">= {self.minimum:g}x {self.what}"


@dataclass(frozen=True, slots=True)
class Goal:
    """All of ``criteria``. ``tvm_fallback_s``: a published TVM time (no schedule), used for the TVM ratio
    when TVM is not installed (the table says so)."""

    criteria: tuple[Criterion, ...] = ()
    tvm_fallback_s: float | None = None

    def text(self) -> str:
        return ", ".join(c.text() for c in self.criteria) or "-"

    def judge(self, *, ratios: Mapping[str, float | None], peak: float | None,
              triad: float | None) -> bool | None:
        """True (met), False (missed) or None (a figure is missing); no criteria gives None."""
        if not self.criteria:
            return None
        verdicts = []
        for c in self.criteria:
            value = {"peak": peak, "triad": triad}.get(c.what, ratios.get(c.what))
            verdicts.append(None if value is None else value >= c.minimum)
        if False in verdicts:
            return False
        return None if None in verdicts else True


def at_least(*, tvm_fallback_s: float | None = None, **minimums: float) -> Goal:
    """``at_least(torch=0.9, peak=0.8)``: polyloop >= 0.9x PyTorch's speed and >= 80% of peak."""
    return Goal(tuple(Criterion(k, v) for k, v in minimums.items()), tvm_fallback_s)
