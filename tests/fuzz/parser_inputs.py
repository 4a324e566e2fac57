# SPDX-License-Identifier: Apache-2.0
"""Hypothesis strategies for parser inputs: text generated from small grammars of ISL loop
domains, kernel instructions and ``@pl.script`` sources, and valid seeds mutated byte-wise
(deletions, insertions of characters that matter to the parsers, repetitions that nest deep,
swapped pieces, keywords dropped in)."""
from __future__ import annotations

from hypothesis import strategies as st

INAMES = ["i", "j", "k", "ii", "t1"]
PARAMS = ["n", "m", "N"]
# characters and words the parsers give meaning to, and some they should reject cleanly
PIECES = ["(", ")", "[", "]", "{", "}", ":", ";", ",", "->", "<=", "<", "=", "==", "+", "-",
          "*", "/", "//", "%", "**", " and ", " or ", " not ", " mod ", " exists ", "floor(",
          "min(", "max(", "if ", "else", "end", "\n", "\t", "#", "<>", "{id=", "dep=", "0",
          "-1", "2**63", "99999999999999999999", "1e308", "nan", "\x00", "\\", "'", '"', "ä",
          "\ud800", "\u202e", "lambda", "__import__", "pl.", "sum(", "where(", "range(", "for ",
          " in ", "def ", "return", "A[", "out[", "i", "n", "    "]

DOMAIN_SEEDS = [
    ("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]"),
    ("{ [i, j] : 0 <= i < n and 0 <= j < i }", "out[i, j] = a[i, j] + a[j, i]"),
    ("[n, m] -> { [i, j] : 0 <= i < n and 0 <= j < m and i mod 2 = 0 }",
     "out[i, j] = a[i, j] * 3"),
    ("{ [i, j] : 0 <= i < n and exists (e : j = 2e and 0 <= j < n) }", "out[i, j] = 1.0"),
    ("{ [i] : 0 <= i < floor(n/4) }", "out[i] = a[4*i]"),
]
INSTRUCTION_SEEDS = [
    ("{ [i, j, k] : 0 <= i, j, k < n }",
     "c[i, j] = sum(k, a[i, k]*b[k, j])  {id=mm}\nd[i, j] = max(c[i, j], 0) {dep=mm}"),
    ("{ [i] : 0 <= i < n }",
     "<> x = a[i] * 2  {id=s1}\nif i > 0\n    out[i] = x + a[i - 1] {dep=s1}\nelse\n"
     "    out[i] = x\nend"),
    ("{ [i, j] : 0 <= i < n and 0 <= j < m }",
     "out[i, j] = where(a[i, j] > 0, sqrt(a[i, j]), exp(-a[i, j]))  # comment"),
    ("{ [i] : 0 <= i < n }", "<float64> s = float64(a[i]) ** 3\nout[i] = s // 2 % 5"),
]
SCRIPT_SEEDS = [
    '''def f(A: pl.Buffer[("n", "m"), "float32"], B: pl.Buffer[("n", "m"), "float32"]):
    for i in range(n):
        for j in range(m):
            B[i, j] = A[i, j] * 2.0 + 1.0
''',
    '''def g(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(1, n):
        for j in range(1, n):
            A[i, j] = A[i - 1, j] + A[i, j - 1]
''',
    '''def h(A: pl.Buffer[("n", "l"), "float32"], B: pl.Buffer[("l", "m"), "float32"],
      C: pl.Buffer[("n", "m"), "float32"]):
    assert n >= 1
    Y = pl.alloc(("n", "m"), "float32")
    for i in range(n):
        for j in range(m):
            Y[i, j] = 0.0
            for k in range(l):
                Y[i, j] += A[i, k] * B[k, j]
    for i in range(n):
        for j in range(m):
            C[i, j] = max(Y[i, j], 0.0) if i > 0 else Y[i, j]
''',
]


@st.composite
def mutated(draw, seed: str) -> str:
    """``seed`` after one to four edits: delete a span, insert a piece (possibly repeated
    hundreds of times), duplicate or swap spans, or overwrite one character."""
    text = seed
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, min(len(text), a + 12)))
        op = draw(st.sampled_from(["delete", "insert", "repeat", "duplicate", "swap", "char"]))
        if op == "delete":
            text = text[:a] + text[b:]
        elif op == "insert":
            text = text[:a] + draw(st.sampled_from(PIECES)) + text[a:]
        elif op == "repeat":
            piece = draw(st.sampled_from(PIECES))
            text = text[:a] + piece * draw(st.integers(2, 600)) + text[a:]
        elif op == "duplicate":
            text = text[:b] + text[a:b] * draw(st.integers(1, 50)) + text[b:]
        elif op == "swap":
            c = draw(st.integers(0, len(text)))
            text = text[:a] + text[c:] + text[a:c] if c > a else text[c:a] + text[:c] + text[a:]
        else:
            text = text[:a] + draw(st.characters()) + text[a + 1:]
    return text


def _affine(names: list[str]) -> st.SearchStrategy[str]:
    atom = st.one_of(st.sampled_from(names), st.integers(-40, 40).map(str),
                     st.tuples(st.integers(-5, 5), st.sampled_from(names)).map(
                         lambda t: f"{t[0]}{t[1]}" if t[0] >= 0 else f"{t[0]}*{t[1]}"))
    return st.recursive(atom, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" + ", " - "]), inner).map("".join),
        st.tuples(inner, st.integers(1, 9)).map(lambda t: f"floor(({t[0]})/{t[1]})"),
        st.tuples(inner, st.integers(1, 9)).map(lambda t: f"({t[0]}) mod {t[1]}"),
        st.tuples(st.sampled_from(["min", "max"]), inner, inner).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]})")), max_leaves=6)


@st.composite
def domains(draw) -> tuple[str, str]:
    """A loop domain from the grammar of ISL sets, and an instruction over its inames."""
    inames = draw(st.lists(st.sampled_from(INAMES), min_size=1, max_size=3, unique=True))
    params = draw(st.lists(st.sampled_from(PARAMS), max_size=2, unique=True))
    names = inames + params
    parts = []
    for it in inames:
        lo, hi = draw(_affine(names)), draw(_affine(names))
        parts.append(draw(st.sampled_from([f"{lo} <= {it} < {hi}", f"{it} >= {lo}",
                                           f"{lo} <= {it} <= {hi}"])))
    for _ in range(draw(st.integers(0, 2))):
        parts.append(f"{draw(_affine(names))} {draw(st.sampled_from(['<', '<=', '=', '>=']))} "
                     f"{draw(_affine(names))}")
    glue = draw(st.sampled_from([" and ", " or "]))
    body = glue.join(parts)
    if draw(st.booleans()):
        body = f"exists (e : {body} and {inames[0]} = 2e)"
    head = f"[{', '.join(params)}] -> " if params and draw(st.booleans()) else ""
    target = f"out[{', '.join(inames)}]"
    return f"{head}{{ [{', '.join(inames)}] : {body} }}", f"{target} = a[{inames[0]}] + 1"


def _value(names: list[str]) -> st.SearchStrategy[str]:
    atom = st.one_of(st.sampled_from(names), st.sampled_from(["1", "2.5", "0", "1e-3"]),
                     st.tuples(st.sampled_from(["a", "b", "out"]),
                               st.lists(st.sampled_from(names), min_size=1, max_size=2)).map(
                         lambda t: f"{t[0]}[{', '.join(t[1])}]"))
    return st.recursive(atom, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from([" + ", " - ", " * ", " / ", " // ", " % ", " ** ",
                                          " < ", " == ", " and "]), inner).map("".join),
        inner.map(lambda x: f"({x})"), inner.map(lambda x: f"-{x}"),
        st.tuples(st.sampled_from(["exp", "sqrt", "abs", "floor", "float64", "int32"]),
                  inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.tuples(st.sampled_from(["max", "min"]), inner, inner).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"where({t[0]}, {t[1]}, {t[2]})")),
        max_leaves=8)


@st.composite
def instructions(draw) -> tuple[str, str]:
    """Instructions from the grammar (assignments, temporaries, options, if blocks) and the
    domain they run over."""
    names = ["i", "j"]
    lines = []
    for k in range(draw(st.integers(1, 4))):
        target = draw(st.sampled_from(["out[i, j]", "out[j, i]", "<> x", "x", "out[i, 0]"]))
        opts = [f"  {{id=s{k}}}", ""] + ([f"  {{id=s{k}, dep=s{k - 1}}}"] if k else [])
        line = f"{target} = {draw(_value(names + ['x']))}{draw(st.sampled_from(opts))}"
        if draw(st.integers(0, 4)) == 0:
            other = f"{target} = {draw(_value(names + ['x']))}"
            line = f"if {draw(_value(names))}\n    {line}\nelse\n    {other}\nend"
        lines.append(line)
    return "{ [i, j] : 0 <= i < n and 0 <= j < n }", "\n".join(lines)


@st.composite
def scripts(draw) -> str:
    """A ``@pl.script`` source from a small grammar of loops, conditions and assignments."""
    lines = ['def f(A: pl.Buffer[("n", "n"), "float32"], B: pl.Buffer[("n", "n"), "float32"]):']
    for _ in range(draw(st.integers(1, 3))):
        lo = draw(st.sampled_from(["0", "1"]))
        lines.append(f"    for i in range({lo}, n):")
        lines.append("        for j in range(n):")
        value = draw(_value(["i", "j"])).replace("out[", "B[").replace("a[", "A[") \
            .replace("b[", "B[").replace("where(", "pl.where(")
        stmt = f"B[i, j] = {value}"
        if draw(st.booleans()):
            stmt = f"if i > j:\n                {stmt}\n            else:\n                B[i, j] = 0.0"
        lines.append(f"            {stmt}")
    return "\n".join(lines) + "\n"
