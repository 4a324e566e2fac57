# SPDX-License-Identifier: Apache-2.0
"""``pl.extract_subst``: name a repeated subexpression of a kernel as a substitution rule
(Loo.py), so that ``pl.precompute`` can store its values.

>>> import polyloop as pl
>>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[i] * a[i] + a[i + 1] * a[i + 1]")
>>> knl = extract_subst(knl, "sq", "a[x] * a[x]", parameters="x")
>>> [[str(x) for x in u.args] for u in knl.rules[0].uses]
[['i'], ['i + 1']]
"""
from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any, Sequence

from ..errors import ParseError, foreign_errors
from ..ir.expr import Expr, Var
from ..ir.program import Program
from .kernel_exprs import Converter, KernelRule, Names, RuleUse
from .kernel_parse import ExprParser, SyntaxErrorAt, error_at, tokenize

# fields a match ignores: a pattern's parameters have no dtype of their own, so the nodes
# above them may differ in dtype (and weak constants in how they print)
_LOOSE = frozenset({"dtype", "weak"})


@foreign_errors("extract_subst", ParseError)
def extract_subst(knl: Any, subst_name: str, template: str,
                  parameters: str | Sequence[str] = ()) -> Any:
    """A kernel with a substitution rule ``subst_name(parameters) := template`` whose calls
    are every subexpression of the instructions that ``template`` matches (``parameters``
    match any expression, the same one wherever a parameter repeats). The instructions do not
    change; ``pl.precompute(knl, subst_name, ...)`` then stores the rule's values.

    >>> knl = pl.extract_subst(knl, "sq", "a[x] * a[x]", parameters="x")  # doctest: +SKIP
    """
    params = tuple(p.strip() for p in parameters.split(",") if p.strip()) \
        if isinstance(parameters, str) else tuple(parameters)
    if not subst_name.isidentifier() or any(r.name == subst_name for r in knl.rules):
        raise ParseError(f"extract_subst: '{subst_name}' is not a new identifier; rules: "
                         + (", ".join(r.name for r in knl.rules) or "none"))
    pattern = _convert(knl.program, template, params)
    uses: list[RuleUse] = []
    for s in knl.program.statements:
        _collect(s.value, pattern, params, subst_name, uses)
    if not uses:
        raise ParseError(f"extract_subst: no instruction of kernel '{knl.program.name}' has a "
                         f"subexpression of the form {template!r}")
    text = f"{subst_name}({', '.join(params)}) := {template}"
    rule = KernelRule(subst_name, params, pattern, tuple(uses), text)
    return replace(knl, rules=knl.rules + (rule,))


def _convert(program: Program, template: str, params: tuple[str, ...]) -> Expr:
    names = Names({i for s in program.statements for i in s.iters}, set(program.params),
                  {b.name: b.ndim for b in program.buffers},
                  {b.name: b.dtype for b in program.buffers})
    conv = Converter(names)
    conv.env.append({p: Var(p) for p in params})
    try:
        p = ExprParser(tokenize(template))
        syn = p.expr()
        if p.tok.kind != "end":
            raise SyntaxErrorAt(p.tok.col, f"unexpected {p.tok.text!r}")
        return conv.expr(syn)
    except SyntaxErrorAt as e:
        raise error_at(template, 0, e.col, f"extract_subst: {e.message}") from None


def _collect(e: Expr, pattern: Expr, params: tuple[str, ...], rule: str,
             out: list[RuleUse]) -> None:
    """The matches of ``pattern`` in ``e``, outermost first (a match is not searched)."""
    bound: dict[str, Expr] = {}
    if _match(pattern, e, params, bound):
        out.append(RuleUse(rule, tuple(bound[p] for p in params), e))
        return
    for child in _children(e):
        _collect(child, pattern, params, rule, out)


def _children(e: Expr) -> list[Expr]:
    out: list[Expr] = []
    for f in dataclasses.fields(e):  # type: ignore[arg-type]
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Expr))
    return out


def _match(p: Expr, e: Expr, params: tuple[str, ...], bound: dict[str, Expr]) -> bool:
    if isinstance(p, Var) and p.name in params:
        if p.name in bound:
            return _match(bound[p.name], e, (), {})
        bound[p.name] = e
        return True
    if type(p) is not type(e):
        return False
    for f in dataclasses.fields(p):  # type: ignore[arg-type]
        if f.name in _LOOSE:
            continue
        x, y = getattr(p, f.name), getattr(e, f.name)
        if isinstance(x, Expr):
            if not _match(x, y, params, bound):
                return False
        elif isinstance(x, tuple):
            if len(x) != len(y) or not all(
                    _match(a, b, params, bound) if isinstance(a, Expr) else a == b
                    for a, b in zip(x, y)):
                return False
        elif x != y:
            return False
    return True


__all__ = ["extract_subst"]
