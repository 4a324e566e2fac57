# SPDX-License-Identifier: Apache-2.0
"""A loop's value for one statement, as the loop tree keeps it: a quasi-affine map
``S[i, j] -> [value]`` of the statement's iterators.

A ``LoopExpr`` is a small immutable value: its isl text (what it is compared, hashed, printed
and pickled by) and the isl map it stands for, remembered once read. The schedule primitives
make loop expressions from isl objects (``affine``, ``LoopExpr.of``): the object is registered
under its text (``isl_util.printed``) and is the map the value stands for wherever it is read
(the legality checks, the AST build), without parsing. A loop expression written as text (a
program's identity loops) is parsed once, on first use. Objects are shared by text, not kept
per value: isl may refine an object's internal form while it is used, and the loops isl writes
can depend on that form, so one text must mean one object for the code to be the same
whichever schedule made the expression first.

>>> e = LoopExpr("{ S[i, j] -> [(j)] }")
>>> e.map(("n",))
Map("[n] -> { S[i, j] -> [j] }")
>>> e.map(("n",)) is e.map(("n",)), e == LoopExpr("{ S[i, j] -> [(j)] }"), str(e)
(True, True, '{ S[i, j] -> [(j)] }')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import islpy as isl

from .isl_util import map_, printed, with_params

@dataclass(frozen=True, slots=True)
class LoopExpr:
    """``S[i, ...] -> [value]`` (see the module docstring): compared by its text, with its
    map remembered by the parameters it was read with."""
    text: str
    _maps: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, m: isl.Map) -> "LoopExpr":
        """The loop expression of the map ``m`` (printed once; read back as ``m``)."""
        return cls(printed(m))

    def map(self, params: Sequence[str]) -> isl.Map:
        """The map, with the parameters ``params`` where the text names none."""
        key = tuple(params)
        got = self._maps.get(key)
        if got is None:
            got = self._maps[key] = map_(with_params(params, self.text))
        return got

    def renamed(self, old: str, new: str) -> "LoopExpr":
        """The same expression for the statement ``new`` (the statement ``old`` renamed)."""
        return LoopExpr(self.text.replace(f"{old}[", f"{new}[", 1))

    def __str__(self) -> str:
        return self.text

    def __reduce__(self):
        return (LoopExpr, (self.text,))     # the map is made again where it is needed


__all__ = ["LoopExpr"]
