# SPDX-License-Identifier: Apache-2.0
"""Mutated loop domains, instructions and script sources give a ``PolyloopError`` that points
at the text -- never a ``RecursionError``, ``IndexError``, isl error, ``TypeError``,
``AttributeError`` or ``UnicodeDecodeError`` from inside polyloop."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

DOMAIN = "{ [i] : 0 <= i < n }"
BODY = "out[i] = 2*a[i]"


def caret_under(message: str, text: str) -> int:
    """The column of the caret line that follows the quoted ``text`` in ``message``."""
    lines = message.splitlines()
    at = next(k for k, line in enumerate(lines) if line.strip() == text.strip())
    return lines[at + 1].index("^") - (len(lines[at]) - len(lines[at].lstrip()))


@pytest.mark.parametrize("instruction, message", [
    ("out[i] = " + "+".join(["a[i]"] * 5000), "nested more than 100 levels"),
    ("out[i] = a[" + "+".join(["i"] * 3000) + "]", "nested more than 100 levels"),
    ("out[i] = " + "(" * 3000 + "a[i]" + ")" * 3000, "nested more than 40 levels"),
    ("out[i] = " + "- " * 3000 + "a[i]", "nested more than 40 levels"),
    ("out[i] = " + "+ " * 3000 + "a[i]", "nested more than 40 levels"),
    ("out[i] = a[i]" + " ** 2" * 3000, "nested more than 40 levels"),
    ("out[i] = " + "not " * 3000 + "a[i]", "nested more than 40 levels"),
])
def test_deep_or_long_instructions_are_refused_with_a_caret(instruction, message):
    with pytest.raises(pl.ParseError, match=message) as e:
        pl.make_kernel(DOMAIN, instruction)
    assert "line 1:" in str(e.value) and "^" in str(e.value)


def test_long_but_reasonable_instructions_still_build(rng):
    knl = pl.make_kernel(DOMAIN, "out[i] = " + " + ".join(["a[i]"] * 60) + " + " +
                         "(" * 30 + "a[i]" + ")" * 30)
    a = rng.standard_normal(11, dtype="float32")
    np.testing.assert_allclose(pl.build(knl)(a), 61 * a, rtol=1e-5)


@pytest.mark.parametrize("domain, message, name", [
    ("{ [i] : 0 <= i < i }", "empty for every value", "{"),
    ("{ [i, j] : 0 <= i < n and 0 <= j < n and j > i + n }", "empty for every value", "{"),
    ("{ [i] : 0 <= i }", "'i' has no upper bound", "i"),
    ("{ [i] : i < n }", "'i' has no lower bound", "i"),
    ("{ [i, jj] : 0 <= i < n and jj >= i }", "'jj' has no upper bound", "jj"),
])
def test_empty_and_unbounded_domains_are_parse_errors_at_the_iname(domain, message, name):
    with pytest.raises(pl.ParseError, match=message) as e:
        pl.make_kernel(domain, "out[i] = a[i]")
    assert caret_under(str(e.value), domain) == domain.index(name)


def test_an_array_only_an_empty_nest_touches_is_a_parse_error():
    with pytest.raises(pl.ParseError, match="cannot infer the shape of 'b'"):
        pl.make_kernel(["{ [i] : 0 <= i < n }", "{ [j] : n <= j < i }"],
                       "out[i] = a[i]\nb[j] = 1 {id=z}")


@pytest.mark.parametrize("domains, instructions, message", [
    (None, BODY, "loop domains must be a string"),
    (5, BODY, "loop domains must be a string"),
    (DOMAIN, None, "instructions must be a string"),
    (DOMAIN, [BODY, 3], "instructions must be a string"),
    (DOMAIN, BODY.encode() + b"\xff", "not UTF-8 text: byte 15"),
    ([b"{ [i] : 0 <= i < n }"], BODY.encode(), None),
])
def test_wrong_types_and_bytes_are_parse_errors(domains, instructions, message):
    if message is None:    # UTF-8 bytes are text
        assert pl.make_kernel(domains, instructions).program.args == ("a", "out")
        return
    with pytest.raises(pl.ParseError, match=message):
        pl.make_kernel(domains, instructions)


SCRIPT = """
def f(A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
    for i in range(n):
        B[i] = {value}
"""


@pytest.mark.parametrize("value", ["+".join(["A[i]"] * 5000), "-" * 5000 + "A[i]"])
def test_script_sources_that_break_python_helpers_are_parse_errors(value):
    with pytest.raises(pl.ParseError, match="pl.script|<script>"):
        pl.script(SCRIPT.format(value=value))


def test_the_boundary_keeps_the_original_exception_for_a_bug_report():
    @pl.errors.foreign_errors("demo")
    def broken(text: str) -> None:
        raise KeyError(text)

    with pytest.raises(pl.ParseError, match="demo: could not process") as e:
        broken("abc")
    assert isinstance(e.value.internal, KeyError)
    assert "input: 'abc'" in str(e.value)
