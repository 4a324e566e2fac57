# SPDX-License-Identifier: Apache-2.0
"""The instruction language of ``pl.make_kernel``: a tokenizer and a recursive-descent parser.

One instruction per line, Loo.py style::

    <> x = a[i, i]                      {id=s1}
    x = x - a[i, j]**2                  {id=s2, dep=s1}
    c[i, j] = sum(k, a[i, k]*b[k, j])   {id=mm}
    if i > 0
        out[i] = out[i - 1] + 1
    else
        out[i] = 0
    end

``<>`` declares a private temporary (``<float64>`` with a dtype); ``{...}`` holds options
(``id``, ``dep`` with ``:``-separated ids); ``#`` starts a comment. Parsing gives a small syntax
tree (``Syntax`` nodes that remember their column); names are resolved later by the front end.

>>> prog = parse_instructions("out[i] = 2*a[i]  {id=double}")
>>> prog[0].id, prog[0].target, str(prog[0].value)
('double', 'out', '(2 * a[i])')
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import ParseError

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?[fFdD]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|//|<=|>=|==|!=|<>|[-+*/%<>=()\[\],:{}])
""", re.VERBOSE)

COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
# Deepest expression tree (and parenthesis nesting) an instruction may have: every later pass
# walks the tree recursively, and hand-written code never comes near this.
MAX_DEPTH = 100
# Deepest nesting of parentheses, brackets, calls and unary operators: the parser recurses
# through about ten methods per level, so this keeps it far from Python's recursion limit.
MAX_NESTING = 40
OPTIONS = ("id", "dep")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str       # "number", "name", "op", "end"
    text: str
    col: int


@dataclass(frozen=True, slots=True)
class Syntax:
    """A node of the instruction syntax tree.

    ``kind`` is one of: number, name, subscript (name[args]), call (name(args)), binary (op,
    args=(lhs, rhs)), unary (op, args=(operand,)), tuple (args).
    """
    kind: str
    col: int
    text: str = ""                  # number text, name, called function or operator
    args: tuple["Syntax", ...] = ()
    depth: int = field(default=1, compare=False, repr=False)   # levels of the tree below

    def __post_init__(self) -> None:
        if self.args:
            object.__setattr__(self, "depth", 1 + max(a.depth for a in self.args))

    def __str__(self) -> str:
        if self.kind in ("number", "name"):
            return self.text
        inner = ", ".join(str(a) for a in self.args)
        if self.kind == "subscript":
            return f"{self.text}[{inner}]"
        if self.kind == "call":
            return f"{self.text}({inner})"
        if self.kind == "tuple":
            return f"({inner})"
        if self.kind == "unary":
            return f"({self.text} {self.args[0]})" if self.text == "not" else \
                f"({self.text}{self.args[0]})"
        return f"({self.args[0]} {self.text} {self.args[1]})"

    def walk(self):
        yield self
        for a in self.args:
            yield from a.walk()


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


class SyntaxErrorAt(Exception):
    def __init__(self, col: int, message: str):
        super().__init__(message)
        self.col = col
        self.message = message


def error_at(text: str, line: int, col: int, message: str) -> ParseError:
    """A ParseError that quotes the line and points at the column."""
    where = f"line {line}: " if line else ""
    return ParseError(f"{where}{message}\n    {text}\n    {' ' * col}^")


def tokenize(text: str) -> list[Token]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SyntaxErrorAt(pos, f"unexpected character {text[pos]!r}")
        if m.lastgroup != "space":
            out.append(Token(m.lastgroup or "", m.group(0), pos))
        pos = m.end()
    out.append(Token("end", "", len(text)))
    return out


class ExprParser:
    """Recursive descent over one line's tokens, Python precedence and ``**``."""

    def __init__(self, tokens: list[Token]):
        self.toks = tokens
        self.k = 0
        self.nesting = 0

    def node(self, kind: str, col: int, text: str, args: tuple[Syntax, ...]) -> Syntax:
        """A tree node, refused where the tree would grow deeper than ``MAX_DEPTH``."""
        out = Syntax(kind, col, text, args)
        if out.depth > MAX_DEPTH:
            raise SyntaxErrorAt(col, f"expression nested more than {MAX_DEPTH} levels deep; "
                                "compute parts of it into temporaries first")
        return out

    @property
    def tok(self) -> Token:
        return self.toks[self.k]

    def take(self, text: str | None = None, kind: str | None = None) -> Token:
        t = self.tok
        if (text is not None and t.text != text) or (kind is not None and t.kind != kind):
            want = repr(text) if text is not None else f"a {kind}"
            got = "the end of the line" if t.kind == "end" else repr(t.text)
            raise SyntaxErrorAt(t.col, f"expected {want}, found {got}")
        self.k += 1
        return t

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "name") and self.tok.text in texts

    def enter(self) -> None:
        """One more level of recursion (a parenthesis, a call, a unary operator), refused past
        ``MAX_NESTING`` before Python's own recursion limit is near."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise SyntaxErrorAt(self.tok.col, "parentheses, brackets, calls or unary operators "
                                f"nested more than {MAX_NESTING} levels deep")

    def expr(self) -> Syntax:
        self.enter()
        lhs = self.and_()
        while self.at("or"):
            t = self.take()
            lhs = self.node("binary", t.col, "or", (lhs, self.and_()))
        self.nesting -= 1
        return lhs

    def and_(self) -> Syntax:
        lhs = self.not_()
        while self.at("and"):
            t = self.take()
            lhs = self.node("binary", t.col, "and", (lhs, self.not_()))
        return lhs

    def not_(self) -> Syntax:
        if self.at("not"):
            t = self.take()
            self.enter()
            operand = self.not_()
            self.nesting -= 1
            return self.node("unary", t.col, "not", (operand,))
        return self.comparison()

    def comparison(self) -> Syntax:
        lhs = self.arith()
        parts = []
        while self.at(*COMPARISONS):
            t = self.take()
            rhs = self.arith()
            parts.append(self.node("binary", t.col, t.text, (lhs, rhs)))
            lhs = rhs
        if not parts:
            return lhs
        out = parts[0]
        for p in parts[1:]:   # a < b < c means a < b and b < c
            out = self.node("binary", p.col, "and", (out, p))
        return out

    def arith(self) -> Syntax:
        lhs = self.term()
        while self.at("+", "-"):
            t = self.take()
            lhs = self.node("binary", t.col, t.text, (lhs, self.term()))
        return lhs

    def term(self) -> Syntax:
        lhs = self.unary()
        while self.at("*", "/", "//", "%"):
            t = self.take()
            lhs = self.node("binary", t.col, t.text, (lhs, self.unary()))
        return lhs

    def unary(self) -> Syntax:
        if self.at("-", "+"):
            t = self.take()
            self.enter()
            operand = self.unary()
            self.nesting -= 1
            return operand if t.text == "+" else self.node("unary", t.col, "-", (operand,))
        return self.power()

    def power(self) -> Syntax:
        base = self.atom()
        if self.at("**"):
            t = self.take()
            self.enter()
            exponent = self.unary()
            self.nesting -= 1
            return self.node("binary", t.col, "**", (base, exponent))
        return base

    def atom(self) -> Syntax:
        t = self.tok
        if t.kind == "number":
            self.k += 1
            return Syntax("number", t.col, t.text)
        if t.kind == "name" and t.text not in ("and", "or", "not"):
            self.k += 1
            if self.at("["):
                self.take("[")
                return self.node("subscript", t.col, t.text, self.items("]"))
            if self.at("("):
                self.take("(")
                return self.node("call", t.col, t.text, self.items(")"))
            return Syntax("name", t.col, t.text)
        if self.at("("):
            self.take("(")
            items = self.items(")")
            if len(items) == 1 and self.toks[self.k - 2].text != ",":
                return items[0]
            return self.node("tuple", t.col, "", items)
        if self.at("["):
            self.take("[")
            return self.node("tuple", t.col, "", self.items("]"))
        got = "the end of the line" if t.kind == "end" else repr(t.text)
        raise SyntaxErrorAt(t.col, f"expected an expression, found {got}")

    def items(self, close: str) -> tuple[Syntax, ...]:
        out: list[Syntax] = []
        while not self.at(close):
            out.append(self.expr())
            if not self.at(close) and not self.at(","):
                got = "the end of the line" if self.tok.kind == "end" else repr(self.tok.text)
                raise SyntaxErrorAt(self.tok.col, f"expected '{close}', found {got}")
            if self.at(","):
                self.take(",")
        self.take(close)
        return tuple(out)


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


def _instruction(text: str, line: int, conditions: tuple[Syntax, ...], index: int) -> Instruction:
    body, opts_text, opts_col = _split_options(text)
    opts = _options(opts_text, opts_col) if opts_text is not None else {}
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
                       conditions, "id" in opts)


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
    lines = text.split("\n") if isinstance(text, str) else [x for t in text for x in t.split("\n")]
    out: list[Instruction] = []
    blocks: list[list] = []    # per open if: [conditions so far (negated), current condition]
    for number, raw in enumerate(lines, start=1):
        src = raw.split("#", 1)[0]
        stripped = src.strip()
        if not stripped:
            continue
        word = stripped.split()[0].rstrip(":")
        try:
            if word == "if" and not stripped.startswith("if("):
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
    return _in_dependence_order(out)


def _in_dependence_order(insns: list[Instruction]) -> list[Instruction]:
    """Instructions run after the ones they name in ``dep=`` (Loo.py's order), otherwise in the
    order written: a stable topological sort; a cycle of deps is an error naming it."""
    done: set[str] = set()
    out: list[Instruction] = []
    pending = list(insns)
    while pending:
        ready = next((x for x in pending if all(d in done for d in x.deps)), None)
        if ready is None:
            cycle = ", ".join(f"{x.id} (dep={':'.join(x.deps)})" for x in pending)
            first = pending[0]
            raise error_at(first.text, first.line, 0, f"the deps of {cycle} form a cycle; "
                           "an instruction cannot run after itself")
        pending.remove(ready)
        done.add(ready.id)
        out.append(ready)
    return out
