# SPDX-License-Identifier: Apache-2.0
"""Syntax-highlighted HTML for programs, schedules and generated C (``_repr_html_`` in Jupyter).

Self-contained: one regular expression per token kind, inline styles, no external CSS or
JavaScript, so the HTML also renders in exported notebooks.

>>> to_html("for i in range(n):  # loop", "python")[:5]
'<pre '
"""
from __future__ import annotations

import html
import re

_STYLE = {"comment": "color:#6a737d;font-style:italic", "string": "color:#032f62",
          "number": "color:#005cc5", "keyword": "color:#d73a49;font-weight:bold",
          "builtin": "color:#6f42c1", "directive": "color:#e36209"}

_PYTHON_KEYWORDS = ("for", "in", "if", "else", "elif", "while", "return", "def", "and", "or",
                    "not", "with", "as", "import", "from", "lambda", "None", "True", "False")
_PYTHON_BUILTINS = ("range", "parallel", "vectorized", "unroll", "unrolled", "max", "min",
                    "where", "exp", "log", "sqrt", "tanh", "abs", "floor", "float32", "float64",
                    "int32", "int64", "bool")
_C_KEYWORDS = ("for", "if", "else", "while", "return", "void", "int", "long", "float", "double",
               "const", "static", "inline", "restrict", "__restrict__", "unsigned", "char",
               "struct", "extern", "int32_t", "int64_t", "uint8_t", "size_t", "bool")
_C_BUILTINS = ("expf", "exp", "logf", "log", "sqrtf", "sqrt", "tanhf", "tanh", "fabsf", "fabs",
               "floorf", "floor", "fmaxf", "fmax", "fminf", "fmin", "malloc", "free", "memcpy")


def _pattern(language: str) -> re.Pattern[str]:
    if language == "c":
        comment, directive = r"//[^\n]*|/\*.*?\*/", r"^[ \t]*#[^\n]*"
        keywords, builtins = _C_KEYWORDS, _C_BUILTINS
    else:
        comment, directive = r"#[^\n]*", r"(?!x)x"
        keywords, builtins = _PYTHON_KEYWORDS, _PYTHON_BUILTINS
    parts = [
        ("directive", directive),
        ("comment", comment),
        ("string", r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'"),
        ("number", r"\b\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fFlLuU]*\b"),
        ("keyword", r"\b(?:" + "|".join(keywords) + r")\b"),
        ("builtin", r"\b(?:" + "|".join(builtins) + r")\b"),
    ]
    return re.compile("|".join(f"(?P<{k}>{p})" for k, p in parts), re.MULTILINE | re.DOTALL)


_PATTERNS = {lang: _pattern(lang) for lang in ("python", "c")}


def to_html(code: str, language: str = "python") -> str:
    """``code`` as a ``<pre>`` block with coloured tokens (``language``: "python" or "c")."""
    if language not in _PATTERNS:
        raise ValueError(f"unknown language {language!r}; valid: python, c")
    out, pos = [], 0
    for m in _PATTERNS[language].finditer(code):
        out.append(html.escape(code[pos:m.start()]))
        kind = m.lastgroup or "comment"
        out.append(f'<span style="{_STYLE[kind]}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(code[pos:]))
    return ('<pre style="font-family:Menlo,Consolas,monospace;font-size:12px;line-height:1.35;'
            'background:#f6f8fa;padding:8px;border-radius:4px;overflow-x:auto">'
            + "".join(out) + "</pre>")
