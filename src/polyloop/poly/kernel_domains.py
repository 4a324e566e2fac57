# SPDX-License-Identifier: Apache-2.0
"""Loop domains written by users as ISL sets (``pl.make_kernel``): parsing, nesting, shapes.

A kernel's domains are sets like ``"{ [i, j] : 0 <= i < n and 0 <= j < i }"``. Names that are
not dimensions of a set are its parameters: either size parameters (``n``) or inames of another
domain (``i`` in ``"{ [j] : 0 <= j < i }"``), which nests this domain inside that one. Nothing
here builds Programs; the front end asks for statement domains and array extents.

>>> doms = parse_domains(["{ [i] : 0 <= i < n }", "{ [j] : 0 <= j < i }"])
>>> [d.inames for d in doms], [d.params for d in doms]
([('i',), ('j',)], [('n',), ('i',)])
>>> statement_domain(doms, "S", ("i", "j"))
'[n] -> { S[i, j] : 0 <= i < n and 0 <= j < i }'
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import islpy as isl

from ..errors import ParseError
from ..ir.expr import BinOp, BinOpKind, Expr, Unary, UnaryKind
from .isl_text import ISL_NAME, ISL_WORDS
from .isl_util import NotAffine, expr_to_isl, params_prefix
from .kernel_extents import (ArrayAccess, assumptions_text, context, infer_extents, intersect,
                             parse_assumptions)

__all__ = ["ISL_WORDS", "ArrayAccess", "Domain", "assumptions_text", "condition_to_isl",
           "context", "infer_extents", "iname_order", "outer_inames", "parse_assumptions",
           "parse_domain", "parse_domains", "size_params", "statement_domain"]



@dataclass(frozen=True, slots=True)
class Domain:
    """One user domain: its inames (set dimensions, in order) and its free names."""
    text: str
    inames: tuple[str, ...]
    params: tuple[str, ...]
    constraints: isl.Set      # every name as a parameter: ``[n, i, j] -> { : ... }``


def _error(text: str, pos: int, message: str) -> ParseError:
    return ParseError(f"{message}\n    {text}\n    {' ' * pos}^")


def _tuple_names(text: str) -> tuple[list[str], int]:
    """The names inside the set's tuple ``[...]`` and the position just after it."""
    depth, brace = 0, text.find("{")
    if brace < 0:
        raise _error(text, 0, "a loop domain is an ISL set in braces, like "
                     "'{ [i] : 0 <= i < n }'")
    start = text.find("[", brace)
    if start < 0:
        raise _error(text, brace, "a loop domain needs a tuple of inames, like '{ [i, j] : ... }'")
    for k in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[k], 0)
        if depth == 0:
            inner = text[start + 1:k]
            names = [x.strip() for x in inner.split(",") if x.strip()]
            for x in names:
                if not ISL_NAME.fullmatch(x):
                    raise _error(text, start + 1 + inner.find(x),
                                 f"'{x}' is not an iname; a domain's tuple lists names only")
            return names, k + 1
    raise _error(text, start, "unbalanced '[' in loop domain")


def _check_balance(text: str) -> None:
    stack: list[tuple[str, int]] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for k, ch in enumerate(text):
        if ch in "([{":
            stack.append((ch, k))
        elif ch in pairs:
            if not stack or stack[-1][0] != pairs[ch]:
                raise _error(text, k, f"unbalanced '{ch}' in loop domain")
            stack.pop()
    if stack:
        raise _error(text, stack[-1][1], f"unclosed '{stack[-1][0]}' in loop domain")


def _bound_names(text: str) -> set[str]:
    """Names bound by ``exists (a, b : ...)``: neither inames nor parameters."""
    out: set[str] = set()
    for m in re.finditer(r"exists\s*\(([^:]*):", text):
        out.update(x.strip() for x in m.group(1).split(",") if x.strip())
    return out


def parse_domain(text: str) -> Domain:
    """Parse one domain; its parameters are found, not declared (``[n] ->`` is optional)."""
    if not isinstance(text, str):
        raise ParseError(f"a loop domain must be a string in ISL syntax, got {text!r}")
    _check_balance(text)
    inames, after = _tuple_names(text)
    if len(set(inames)) != len(inames):
        raise _error(text, text.find("["), "an iname is listed twice in this domain")
    explicit: list[str] = []
    body = text
    head = re.match(r"\s*\[([^\]]*)\]\s*->", text)
    if head:
        explicit = [x.strip() for x in head.group(1).split(",") if x.strip()]
        body = text[head.end():]
    skip = set(inames) | ISL_WORDS | _bound_names(text)
    found = list(dict.fromkeys(explicit + [m.group(0) for m in ISL_NAME.finditer(body)
                                           if m.group(0) not in skip and m.start() >= 0]))
    brace = body.find("{")
    tuple_head = body[brace + 1:body.find("[", brace)].strip()
    params = [p for p in found if p != tuple_head and p not in inames]
    full = params_prefix(params) + body.strip()
    try:
        s = isl.Set(full)
    except isl.Error as e:
        col = _suspect_column(text, after)
        caret = f"\n    {' ' * col}^" if col is not None else ""
        raise ParseError(f"invalid loop domain (ISL syntax, e.g. '{{ [i, j] : 0 <= i < n and "
                         f"0 <= j < i }}'):\n    {text}{caret}\n  isl says: {e}") from None
    s = s.set_tuple_name(None) if s.get_tuple_name() else s
    _check_bounded(text, s, inames)
    npar = s.dim(isl.dim_type.param)
    constraints = s.move_dims(isl.dim_type.param, npar, isl.dim_type.set, 0,
                              s.dim(isl.dim_type.set))
    return Domain(text, tuple(inames), tuple(params), constraints)


def _check_bounded(text: str, s: isl.Set, inames: list[str]) -> None:
    """Every iname has a lower and an upper bound (for fixed parameters), and some parameter
    values leave the domain non-empty: a loop must have ends, and a domain that no parameter
    value makes non-empty is a typing mistake (``0 <= i < i``)."""
    if s.params().is_empty() or s.is_empty():
        raise _error(text, text.find("{"), "this loop domain is empty for every value of its "
                     "parameters; check the bounds of its inames")
    for k, name in enumerate(inames):
        for side, optimum in (("lower", s.dim_min), ("upper", s.dim_max)):
            try:
                optimum(k)
            except isl.Error:
                raise _error(text, _name_column(text, name), f"iname '{name}' has no {side} "
                             f"bound in this domain; bound it, e.g. '0 <= {name} < n'") from None


def _name_column(text: str, name: str) -> int:
    m = re.search(rf"(?<![A-Za-z0-9_']){re.escape(name)}(?![A-Za-z0-9_'])", text)
    return m.start() if m else 0


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_']*)|(?P<num>\d+)|"
                    r"(?P<op><=|>=|<<|>>|->|[-+*/<>=(){}\[\],:;]))")
_BINARY = {"<=", ">=", "<", ">", "=", "+", "*", "/", "and", "or", "mod", ":"}


def _suspect_column(text: str, start: int) -> int | None:
    """Where a constraint list most likely goes wrong: an unknown character, two operators in
    a row, or an operator with nothing after it (``0 <= i < n and }``)."""
    pos, prev = start, None
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return pos + len(text[pos:]) - len(text[pos:].lstrip())
        tok = m.group(m.lastgroup or "op")
        col = m.start(m.lastgroup or "op")
        if tok in ("}", ")") and prev in _BINARY:
            return col
        if tok in _BINARY and prev in _BINARY - {":"}:
            return col
        prev, pos = tok, m.end()
    return None


def parse_domains(texts: str | Sequence[str]) -> list[Domain]:
    """Parse the domains of a kernel; each iname must belong to exactly one domain."""
    items = [texts] if isinstance(texts, str) else list(texts)
    if not items:
        raise ParseError("make_kernel needs at least one loop domain, like '{ [i] : 0 <= i < n }'")
    doms = [parse_domain(t) for t in items]
    owner: dict[str, str] = {}
    for d in doms:
        for i in d.inames:
            if i in owner:
                raise ParseError(f"iname '{i}' is declared by two domains: {owner[i]!r} and "
                                 f"{d.text!r}; give each loop its own name")
            owner[i] = d.text
    return doms


def iname_order(domains: Sequence[Domain]) -> list[str]:
    """All inames, a domain's inames after those of the domains it depends on."""
    by_iname = {i: k for k, d in enumerate(domains) for i in d.inames}
    done: list[int] = []
    visiting: set[int] = set()

    def visit(k: int) -> None:
        if k in done:
            return
        if k in visiting:
            raise ParseError(f"loop domains depend on each other in a cycle: {domains[k].text!r}")
        visiting.add(k)
        for p in domains[k].params:
            if p in by_iname and by_iname[p] != k:
                visit(by_iname[p])
        visiting.discard(k)
        done.append(k)
    for k in range(len(domains)):
        visit(k)
    return [i for k in done for i in domains[k].inames]


def outer_inames(domains: Sequence[Domain], inames: Sequence[str]) -> set[str]:
    """``inames`` plus every iname their domains depend on (the loops they sit inside)."""
    by_iname = {i: d for d in domains for i in d.inames}
    out, todo = set(), list(inames)
    while todo:
        i = todo.pop()
        if i in out:
            continue
        out.add(i)
        todo.extend(p for p in by_iname[i].params if p in by_iname)
    return out


def size_params(domains: Sequence[Domain]) -> list[str]:
    """The free names of the domains that are not inames, in order of appearance."""
    inames = {i for d in domains for i in d.inames}
    return list(dict.fromkeys(p for d in domains for p in d.params if p not in inames))


def statement_domain(domains: Sequence[Domain], stmt: str, iters: Sequence[str],
                     conditions: Sequence[str] = ()) -> str:
    """The ISL text of ``stmt``'s domain over ``iters`` (in that order), intersected with
    affine ``conditions`` (ISL constraint texts over inames and parameters)."""
    by_iname = {i: d for d in domains for i in d.inames}
    cons = None
    for d in dict.fromkeys(by_iname[i] for i in iters):   # each domain once
        c = d.constraints
        cons = c if cons is None else intersect(cons, c)
    if cons is None:
        cons = isl.Set("{ [] }")
    for text in conditions:
        names = [m.group(0) for m in ISL_NAME.finditer(text) if m.group(0) not in ISL_WORDS]
        c = isl.Set(f"{params_prefix(list(dict.fromkeys(names)))}{{ [] : {text} }}")
        cons = intersect(cons, c)
    s = cons
    for k, it in enumerate(iters):
        idx = s.find_dim_by_name(isl.dim_type.param, it)
        if idx < 0:   # an iname no constraint mentions (unbounded): never from a domain
            raise ParseError(f"iname '{it}' of '{stmt}' has no loop domain")
        s = s.move_dims(isl.dim_type.set, k, isl.dim_type.param, idx, 1)
    for name in [s.get_dim_name(isl.dim_type.param, k) for k in range(s.dim(isl.dim_type.param))]:
        if name in by_iname:   # an iname of a domain this statement is not in: project it out
            idx = s.find_dim_by_name(isl.dim_type.param, name)
            s = s.project_out(isl.dim_type.param, idx, 1)
    s = s.set_tuple_name(stmt).coalesce()
    return str(s)




_NEGATED = {BinOpKind.LT: BinOpKind.GE, BinOpKind.LE: BinOpKind.GT, BinOpKind.GT: BinOpKind.LE,
            BinOpKind.GE: BinOpKind.LT, BinOpKind.EQ: BinOpKind.NE, BinOpKind.NE: BinOpKind.EQ}
_ISL_COMPARISON = {BinOpKind.LT: "<", BinOpKind.LE: "<=", BinOpKind.GT: ">", BinOpKind.GE: ">=",
                   BinOpKind.EQ: "="}


def condition_to_isl(cond: Expr, negate: bool = False) -> str:
    """ISL constraint text of a condition on inames and size parameters, or raise NotAffine
    (conditions on array values are not constraints).

    >>> from polyloop.ir.expr import Var
    >>> condition_to_isl(Var("i") > 0)
    '(i > 0)'
    """
    if isinstance(cond, Unary) and cond.op is UnaryKind.NOT:
        return condition_to_isl(cond.operand, not negate)
    if not isinstance(cond, BinOp):
        raise NotAffine(cond)
    if cond.op in (BinOpKind.AND, BinOpKind.OR):
        joiner = " and " if (cond.op is BinOpKind.AND) != negate else " or "
        return "(" + condition_to_isl(cond.lhs, negate) + joiner + \
            condition_to_isl(cond.rhs, negate) + ")"
    op = _NEGATED[cond.op] if negate and cond.op in _NEGATED else cond.op
    if op not in _ISL_COMPARISON and op is not BinOpKind.NE:
        raise NotAffine(cond)
    if not (cond.lhs.dtype.is_int and cond.rhs.dtype.is_int):
        raise NotAffine(cond)
    a, b = expr_to_isl(cond.lhs), expr_to_isl(cond.rhs)
    if op is BinOpKind.NE:
        return f"({a} < {b} or {a} > {b})"
    return f"({a} {_ISL_COMPARISON[op]} {b})"
