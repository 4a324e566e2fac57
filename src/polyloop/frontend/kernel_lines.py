# SPDX-License-Identifier: Apache-2.0
"""The lines of ``pl.make_kernel``'s instructions: assignments with their ``{...}`` options,
``if/elif/else/end`` blocks, and the order ``dep=`` asks for.

>>> prog = parse_instructions("out[i] = 2*a[i]  {id=double}")
>>> prog[0].id, prog[0].target, str(prog[0].value)
('double', 'out', '(2 * a[i])')
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import ParseError
from ..ir.barriers import BarrierScope
from .kernel_parse import ExprParser, Syntax, SyntaxErrorAt, Token, error_at, tokenize

OPTIONS = ("id", "dep", "inames", "priority")


@dataclass(frozen=True, slots=True)
class Instruction:
    """``target[indices] = value`` with its options and the conditions of enclosing ``if``s."""
    id: str
    target: str
    indices: tuple[Syntax, ...]
    value: Syntax
    line: int
    text: str
    temporary: str | None = None           # None: not declared here; "": ``<>``; or a dtype
    deps: tuple[str, ...] = ()
    conditions: tuple[Syntax, ...] = field(default=())   # all must hold (else-branches negated)
    explicit_id: bool = False
    barrier: BarrierScope | None = None    # ``... lbarrier``: no target, no value
    inames: tuple[str, ...] | None = None  # a barrier's loops (``inames=i:j``), None: inferred
    priority: int = 0                      # among instructions free to run, higher goes first


@dataclass(frozen=True, slots=True)
class SubstRule:
    """``name(params) := body``: a substitution rule (Loo.py), a macro expanded wherever an
    instruction calls it. ``text`` is its line as written; columns of ``body`` point into it."""
    name: str
    params: tuple[str, ...]
    body: Syntax
    line: int
    text: str


@dataclass(frozen=True, slots=True)
class KernelText:
    """The parsed instruction text: instructions in dependence order, and the rules."""
    instructions: tuple[Instruction, ...]
    rules: tuple[SubstRule, ...] = ()


# a rule's head, ``name(params) :=``; the body follows
_RULE_HEAD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(([^()]*)\)\s*:=")
# names a rule cannot take: they are the language's own functions
RESERVED = frozenset({"sum", "max", "min", "where", "if", "and", "or", "not"})


def _rule(src: str, line: int) -> SubstRule | None:
    """The substitution rule on this line, or None when the line is no rule."""
    m = _RULE_HEAD.match(src)
    if m is None:
        return None
    name = m.group(1)
    if name in RESERVED:
        raise SyntaxErrorAt(m.start(1), f"'{name}' is a function of the kernel language; "
                            "give the substitution rule another name")
    params: list[str] = []
    col = m.start(2)
    for part in m.group(2).split(","):
        here = col + len(part) - len(part.lstrip())
        col += len(part) + 1
        p = part.strip()
        if not p and len(m.group(2).split(",")) == 1:
            break
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
            raise SyntaxErrorAt(here, f"a parameter of rule '{name}' must be a name, got {p!r}")
        if p in params:
            raise SyntaxErrorAt(here, f"rule '{name}' names parameter '{p}' twice")
        params.append(p)
    body_col = m.end()
    p = ExprParser([Token(t.kind, t.text, t.col + body_col) for t in tokenize(src[body_col:])])
    body = p.expr()
    if p.tok.kind != "end":
        raise SyntaxErrorAt(p.tok.col, f"unexpected {p.tok.text!r} after the body of rule "
                            f"'{name}' (options in {{...}} are for instructions)")
    return SubstRule(name, tuple(params), body, line, src.rstrip())


def _split_options(text: str) -> tuple[str, str | None, int]:
    """The instruction without its trailing ``{...}`` options, the options, their column."""
    stripped = text.rstrip()
    if not stripped.endswith("}"):
        return text, None, -1
    start = stripped.rfind("{")
    if start < 0:
        raise SyntaxErrorAt(len(stripped) - 1, "unbalanced '}'")
    return stripped[:start], stripped[start + 1:-1], start + 1


def _options(text: str, col: int) -> dict[str, str]:
    out: dict[str, str] = {}
    offset = col
    for part in text.split(","):
        here = offset + len(part) - len(part.lstrip())
        offset += len(part) + 1
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not value.strip():
            raise SyntaxErrorAt(here, f"an option is written name=value, got {part.strip()!r}")
        if key not in OPTIONS:
            raise SyntaxErrorAt(here, f"unknown option {key!r}; valid options: "
                                + ", ".join(OPTIONS))
        out[key] = value.strip()
    return out


_BARRIER = re.compile(r"\s*\.\.\.\s*(lbarrier|gbarrier)\s*$")


def _barrier(body: str, opts: dict[str, str], line: int, text: str, conditions, index: int
             ) -> Instruction | None:
    """``... lbarrier {id=b, dep=w, inames=i}`` (or ``gbarrier``), or None for another line."""
    m = _BARRIER.match(body)
    if m is None:
        if body.lstrip().startswith("..."):
            raise SyntaxErrorAt(body.find("...") + 3, "after '...' write lbarrier (a work-group "
                                "barrier) or gbarrier (a global one)")
        return None
    if conditions:
        raise SyntaxErrorAt(0, "a barrier inside an 'if' block would be reached by some "
                            "work-items only; place it outside if/end")
    ident = opts.get("id") or f"barrier_{index}"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
        raise SyntaxErrorAt(0, f"barrier id {ident!r} is not an identifier")
    deps = tuple(d.strip() for d in opts.get("dep", "").split(":") if d.strip())
    inames = tuple(x.strip() for x in opts["inames"].split(":") if x.strip()) \
        if "inames" in opts else None
    scope = BarrierScope.LOCAL if m.group(1) == "lbarrier" else BarrierScope.GLOBAL
    return Instruction(ident, "", (), Syntax("number", 0, "0"), line, text.strip(), None, deps,
                       (), "id" in opts, scope, inames)


def _instruction(text: str, line: int, conditions: tuple[Syntax, ...], index: int) -> Instruction:
    body, opts_text, opts_col = _split_options(text)
    opts = _options(opts_text, opts_col) if opts_text is not None else {}
    barrier = _barrier(body, opts, line, text, conditions, index)
    if barrier is not None:
        return barrier
    if "inames" in opts:
        raise SyntaxErrorAt(opts_col, "inames= is an option of barriers (... lbarrier "
                            "{inames=i}); an instruction's loops are the inames it uses")
    p = ExprParser(tokenize(body))
    temporary = None
    if p.at("<>"):
        p.take()
        temporary = ""
    elif p.at("<"):
        p.take("<")
        temporary = p.take(kind="name").text
        p.take(">")
    head = p.take(kind="name")
    indices: tuple[Syntax, ...] = ()
    if p.at("["):
        p.take("[")
        indices = p.items("]")
    p.take("=")
    value = p.expr()
    if p.tok.kind != "end":
        raise SyntaxErrorAt(p.tok.col, f"unexpected {p.tok.text!r} after the expression")
    ident = opts.get("id") or ("insn" if index == 0 else f"insn_{index}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
        raise SyntaxErrorAt(opts_col, f"instruction id {ident!r} is not an identifier")
    deps = tuple(d.strip() for d in opts.get("dep", "").split(":") if d.strip())
    return Instruction(ident, head.text, indices, value, line, text.strip(), temporary, deps,
                       conditions, "id" in opts, priority=_priority(opts, opts_col))


def _priority(opts: dict[str, str], col: int) -> int:
    text = opts.get("priority", "0")
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise SyntaxErrorAt(col, f"priority={text!r} is not an integer; write e.g. priority=10 "
                            "(higher runs first among instructions free to run)")
    return int(text)


def _condition(text: str, keyword: str) -> Syntax:
    rest = text.lstrip()[len(keyword):]
    col0 = len(text) - len(text.lstrip()) + len(keyword)
    p = ExprParser([Token(t.kind, t.text, t.col + col0) for t in tokenize(rest)])
    if p.tok.kind == "end":
        raise SyntaxErrorAt(col0, f"'{keyword}' needs a condition, like '{keyword} i > 0'")
    cond = p.expr()
    if p.at(":"):
        p.take(":")
    if p.tok.kind != "end":
        raise SyntaxErrorAt(p.tok.col, f"unexpected {p.tok.text!r} after the condition")
    return cond


def _negate(c: Syntax) -> Syntax:
    return Syntax("unary", c.col, "not", (c,))


def parse_instructions(text: str | list[str] | tuple[str, ...]) -> list[Instruction]:
    """Parse instructions (one per line, or a list of lines) with ``if/elif/else/end`` blocks."""
    return list(parse_kernel_text(text).instructions)


def parse_kernel_text(text: str | list[str] | tuple[str, ...]) -> KernelText:
    """Parse instructions and substitution rules (``f(x) := 2*a[x]``), one per line.

    >>> t = parse_kernel_text(["f(x, y) := a[x] * y", "out[i] = f(i, 2)"])
    >>> t.rules[0].params, str(t.rules[0].body)
    (('x', 'y'), '(a[x] * y)')
    """
    lines = text.split("\n") if isinstance(text, str) else [x for t in text for x in t.split("\n")]
    out: list[Instruction] = []
    rules: dict[str, SubstRule] = {}
    blocks: list[list] = []    # per open if: [conditions so far (negated), current condition]
    for number, raw in enumerate(lines, start=1):
        src = raw.split("#", 1)[0]
        stripped = src.strip()
        if not stripped:
            continue
        word = stripped.split()[0].rstrip(":")
        try:
            rule = _rule(src, number)
            if rule is not None:
                _add_rule(rules, rule, bool(blocks))
            elif word == "if" and not stripped.startswith("if("):
                blocks.append([[], _condition(src, "if")])
            elif word == "elif":
                if not blocks:
                    raise SyntaxErrorAt(src.find("elif"), "'elif' without 'if'")
                b = blocks[-1]
                b[0].append(_negate(b[1]))
                b[1] = _condition(src, "elif")
            elif word == "else":
                if not blocks:
                    raise SyntaxErrorAt(src.find("else"), "'else' without 'if'")
                b = blocks[-1]
                b[0].append(_negate(b[1]))
                b[1] = None
            elif word == "end":
                if not blocks:
                    raise SyntaxErrorAt(src.find("end"), "'end' without 'if'")
                blocks.pop()
            else:
                conds = tuple(c for b in blocks for c in b[0] + ([b[1]] if b[1] else []))
                out.append(_instruction(src, number, conds, len(out)))
        except SyntaxErrorAt as e:
            raise error_at(raw.rstrip(), number, e.col, e.message) from None
    if blocks:
        raise ParseError("an 'if' block is not closed: add 'end' after its instructions")
    if not out:
        raise ParseError("make_kernel needs at least one instruction, like 'out[i] = 2*a[i]'")
    ids: dict[str, int] = {}
    for ins in out:
        if ins.id in ids:
            raise error_at(ins.text, ins.line, 0, f"instruction id '{ins.id}' is used twice "
                           f"(also on line {ids[ins.id]})")
        ids[ins.id] = ins.line
    for ins in out:
        for d in ins.deps:
            if d not in ids:
                raise error_at(ins.text, ins.line, max(0, ins.text.find(d)),
                               f"dep={d!r} names no instruction; ids: {', '.join(ids)}")
    return KernelText(tuple(_in_dependence_order(out)), tuple(rules.values()))


def _add_rule(rules: dict[str, SubstRule], rule: SubstRule, in_block: bool) -> None:
    if in_block:
        raise SyntaxErrorAt(0, f"rule '{rule.name}' is inside an 'if' block; write substitution "
                            "rules outside if/end (a rule is a macro, not a statement)")
    if rule.name in rules:
        raise SyntaxErrorAt(0, f"substitution rule '{rule.name}' is defined twice (also on line "
                            f"{rules[rule.name].line})")
    rules[rule.name] = rule


def _in_dependence_order(insns: list[Instruction]) -> list[Instruction]:
    """Instructions run after the ones they name in ``dep=`` (Loo.py's order), otherwise in the
    order written; among instructions free to run, a higher ``priority=`` goes first. A cycle of
    deps is an error naming it."""
    done: set[str] = set()
    out: list[Instruction] = []
    pending = list(insns)
    while pending:
        free = [x for x in pending if all(d in done for d in x.deps)]
        ready = max(free, key=lambda x: x.priority) if free else None
        if ready is None:
            cycle = ", ".join(f"{x.id} (dep={':'.join(x.deps)})" for x in pending)
            first = pending[0]
            raise error_at(first.text, first.line, 0, f"the deps of {cycle} form a cycle; "
                           "an instruction cannot run after itself")
        pending.remove(ready)
        done.add(ready.id)
        out.append(ready)
    return out
