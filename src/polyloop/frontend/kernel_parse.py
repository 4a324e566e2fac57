# SPDX-License-Identifier: Apache-2.0
"""The expression language of ``pl.make_kernel``'s instructions: a tokenizer and a
recursive-descent parser (the lines themselves are read by ``kernel_lines``).

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

>>> str(ExprParser(tokenize("2*a[i] + b")).expr())
'((2 * a[i]) + b)'

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
