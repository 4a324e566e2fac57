# SPDX-License-Identifier: Apache-2.0
"""The sizes of an imported model: its size symbols (``torch.export``'s ``s0``..., or an ONNX
model's dimension names) named after the user's size names, sizes computed from them
(``s0*s1`` after a reshape) as derived size parameters, and the conditions the model needs of
them (``seq <= 512`` for a table of positions, ``batch != 1`` where the code branches on a
batch of one) as ranges the executor checks at call time.
"""
from __future__ import annotations

import re

from ..errors import PolyloopError
from .ir import Dim, SizeRule


class SizeNames:
    """``torch.export``'s size symbols and the size parameters they stand for (``names``:
    symbol -> name), each named size's range (``ranges``), the derived sizes, and the example
    value of each symbol (``examples``: the sizes the model was traced at)."""

    def __init__(self, names: dict[str, str], ranges: dict[str, tuple[int, int | None]],
                 examples: dict[str, int] | None = None) -> None:
        self.names = names
        self.ranges = ranges
        self.examples = examples or {}
        self.derived: dict[str, SizeRule] = {}
        self._by_expr: dict[str, str] = {}

    def dim(self, d: object) -> Dim:
        """A dimension of the graph (an int or a size parameter) from an int or a SymInt.
        ``min(16, seq)`` (the rows a slice of a table of 16 keeps) is ``seq``, bounded by 16."""
        if isinstance(d, (int, str)):
            return d
        expr = d.node.expr if hasattr(d, "node") else d
        if expr.is_number:
            return int(expr)
        if expr.is_Symbol and str(expr) in self.names:
            return self.names[str(expr)]
        clamped = _clamp(expr)
        if clamped is not None:
            inner, low, high = clamped
            name = self.dim(inner)
            if isinstance(name, str):
                self.bound(name, low=low, high=high)
                return name
        return self._derive(expr)

    def _derive(self, expr) -> str:
        import sympy
        key = str(expr)
        if key in self._by_expr:
            return self._by_expr[key]
        symbols = sorted(expr.free_symbols, key=str)
        text = self.describe(expr)
        if any(str(s) not in self.names for s in symbols):
            raise PolyloopError(f"the size {text} depends on a size that is not named; only "
                                "sizes named in dynamic= (or batch=) may vary")
        try:
            poly = sympy.Poly(expr, *symbols)
        except sympy.PolynomialError:
            poly = None
        if poly is None or any(not c.is_Integer for c in poly.coeffs()):
            raise PolyloopError(f"the size {text} is not a polynomial with integer "
                                "coefficients of the named sizes; polyloop cannot follow it")
        terms = tuple((int(c), tuple(self.names[str(s)] for s, e in zip(symbols, m)
                                     for _ in range(e)))
                      for m, c in poly.terms())
        name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", text.replace("*", "_x_")
                                         .replace("+", "_p_").replace("-", "_m_"))).strip("_")
        if not name[:1].isalpha():      # "3*b": a name starts with a letter
            name = f"size_{name}"
        while name in self.derived or name in self.names.values():
            name += "_"
        self.derived[name] = SizeRule(name, 1, None, terms)
        self._by_expr[key] = name
        return name

    def expression(self, d: Dim):
        """The sympy expression of dimension ``d`` (an int, a named size or a derived one) in
        the symbols of the sizes: the inverse of ``dim``."""
        import sympy
        if isinstance(d, int):
            return sympy.Integer(d)
        if d in self.derived:
            return sympy.Add(*(sympy.Mul(c, *(self.expression(n) for n in names))
                               for c, names in self.derived[d].terms))
        symbols = [s for s, name in self.names.items() if name == d]
        if not symbols:
            raise PolyloopError(f"{d!r} is not a size parameter of the model")
        return sympy.Symbol(symbols[0], integer=True, positive=True)

    def bound(self, name: str, *, low: int | None = None, high: int | None = None) -> None:
        """Narrow size ``name`` to ``low <= name <= high`` (None: that side unchanged)."""
        if name in self.derived:
            rule = self.derived[name]
            lo, hi = _narrow((rule.low, rule.high), low, high)
            self.derived[name] = SizeRule(name, lo, hi, rule.terms)
        else:
            self.ranges[name] = _narrow(self.ranges.get(name, (1, None)), low, high)

    def require(self, condition, why: str) -> None:
        """Narrow the ranges so that ``condition`` (a sympy condition on the sizes, recorded by
        ``torch.export`` as a run-time assertion) holds: on one size, to the run of values
        around the traced one where it holds; on several sizes, refused."""
        symbols = sorted(condition.free_symbols, key=str)
        if not symbols:
            return
        text = self.describe(condition)
        named = [s for s in symbols if str(s) in self.names]
        if len(symbols) > 1 or not named or str(symbols[0]) not in self.examples:
            raise PolyloopError(f"the model needs {text} of its sizes ({why}); polyloop checks "
                                "each size's range only: leave all but one of these sizes out "
                                "of dynamic=")
        sym = symbols[0]
        name = self.names[str(sym)]
        low, high = self.ranges.get(name, (1, None))
        lo, hi = _true_run(condition, sym, self.examples[str(sym)], low, high, text)
        self.ranges[name] = (lo, hi)

    def rules(self) -> list[SizeRule]:
        """The ranges of the named sizes, then the derived sizes, in the order they appeared."""
        named = [SizeRule(name, lo, hi) for name, (lo, hi) in self.ranges.items()]
        return named + list(self.derived.values())

    def describe(self, expr) -> str:
        """``expr`` with the user's size names for torch's symbols."""
        text = str(expr)
        for sym, name in self.names.items():
            text = re.sub(rf"\b{sym}\b", name, text)
        return text


def _narrow(rng: tuple[int, int | None], low: int | None, high: int | None
            ) -> tuple[int, int | None]:
    lo, hi = rng
    if low is not None:
        lo = max(lo, low)
    if high is not None:
        hi = high if hi is None else min(hi, high)
    return lo, hi


def _clamp(expr):
    """``(e, low, high)`` for ``Min(c, e)`` (``high = c``) or ``Max(c, e)`` (``low = c``)
    with an integer ``c``; None for any other expression."""
    import sympy
    mins, maxs = _min_max_types()
    if not isinstance(expr, mins + maxs) or len(expr.args) != 2:
        return None
    numbers = [a for a in expr.args if a.is_Integer]
    others = [a for a in expr.args if not a.is_Integer]
    if len(numbers) != 1 or len(others) != 1:
        return None
    c = int(numbers[0])
    return (others[0], None, c) if isinstance(expr, mins) else (others[0], c, None)


def _min_max_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """sympy's Min and Max classes, and torch's own (its size expressions use those)."""
    import sympy
    mins, maxs = [sympy.Min], [sympy.Max]
    try:
        from torch.utils._sympy import functions
    except ImportError:
        return tuple(mins), tuple(maxs)
    return (*mins, functions.Min), (*maxs, functions.Max)


def _true_run(condition, sym, example: int, low: int, high: int | None, text: str
              ) -> tuple[int, int | None]:
    """The run of consecutive sizes around ``example`` (within ``[low, high]``) where
    ``condition`` holds. Beyond ``2 + 2 * (sum of the condition's integer constants)`` a
    condition of sums, products, min and max of one size takes one value, so the run is
    unbounded above when it reaches there."""
    import sympy
    constants = sum(abs(int(a)) for a in condition.atoms(sympy.Integer))
    beyond = 2 + 2 * constants

    def holds(v: int) -> bool:
        try:
            return bool(condition.subs(sym, min(v, beyond)))
        except TypeError:
            raise PolyloopError(f"the model needs {text} of its sizes; polyloop cannot "
                                "evaluate it") from None
    if not holds(example):
        raise PolyloopError(f"the model needs {text} of its sizes, which its example "
                            f"inputs do not meet")
    lo = min(example, beyond)
    while lo - 1 >= low and holds(lo - 1):
        lo -= 1
    hi: int | None = min(example, beyond)
    while hi is not None and (high is None or hi < high) and holds(hi + 1):
        hi = None if hi + 1 >= beyond else hi + 1
    if hi is None:
        return lo, high
    return lo, hi if high is None else min(hi, high)
