# SPDX-License-Identifier: Apache-2.0
"""CodeWriter: the one place where indentation, braces and semicolons of generated code live."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator


def comment_text(text: str) -> str:
    r"""``text`` safe inside a ``//`` comment: a backslash (which at the end of a line would
    continue the comment over the next one), ``??`` (a trigraph in some C modes), control and
    non-ASCII characters are written as escapes.

    >>> comment_text("value: a\\"), comment_text("größe ??/")
    ('value: a\\x5c', 'gr\\xf6\\xdfe ?\\x3f/')
    """
    out: list[str] = []
    for ch in text:
        if ch == "\\" or (ch == "?" and out and out[-1] == "?"):
            out.append(f"\\x{ord(ch):02x}")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


class CodeWriter:
    """Lines of code whose indentation is managed by context managers.

    >>> w = CodeWriter()
    >>> with w.block("for (int64_t i = 0; i < n; i++)"):
    ...     w.statement("A[i] = 0")
    >>> print(w.text(), end="")
    for (int64_t i = 0; i < n; i++) {
        A[i] = 0;
    }
    """

    def __init__(self, indent: str = "    ") -> None:
        self._unit = indent
        self._depth = 0
        self._lines: list[str] = []

    def line(self, text: str = "") -> None:
        """One raw line (a pragma, a preprocessor directive) at the current indentation."""
        self._lines.append(self._unit * self._depth + text if text else "")

    def lines(self, texts: Iterable[str]) -> None:
        """Raw lines, each at the current indentation (keeps their own relative indentation)."""
        for t in texts:
            self.line(t)

    def statement(self, text: str) -> None:
        """A statement: the writer adds the semicolon."""
        self.line(text + ";")

    def comment(self, text: str) -> None:
        """A ``//`` comment, one per line of text, whatever the text holds (it may come from a
        user): see ``comment_text``."""
        for part in str(text).splitlines() or [""]:
            self.line(("// " + comment_text(part)).rstrip())

    def blank(self) -> None:
        """A blank line; never at the start of a block and never two in a row."""
        if self._lines and self._lines[-1] and not self._lines[-1].endswith("{"):
            self._lines.append("")

    @contextmanager
    def indent(self) -> Iterator[None]:
        """Lines written inside the ``with`` are indented one more level."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextmanager
    def block(self, header: str, *, chained: bool = False) -> Iterator[None]:
        """``header {`` ... ``}``; ``chained=True`` continues the block just closed:

        >>> w = CodeWriter()
        >>> with w.block("if (x)"):
        ...     w.statement("y = 1")
        >>> with w.block("else", chained=True):
        ...     w.statement("y = 2")
        >>> print(w.text(), end="")
        if (x) {
            y = 1;
        } else {
            y = 2;
        }
        """
        opening = f"{header} {{" if header else "{"
        if chained:
            closing = self._unit * self._depth + "}"
            if not self._lines or self._lines[-1] != closing:
                raise ValueError(f"block({header!r}, chained=True) must follow a closed block")
            self._lines.pop()
            opening = "} " + opening
        self.line(opening)
        with self.indent():
            yield
        self.line("}")

    def text(self) -> str:
        """The code, ending with a newline; trailing blank lines are dropped."""
        lines = list(self._lines)
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.text()
