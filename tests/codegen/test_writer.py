# SPDX-License-Identifier: Apache-2.0
"""CodeWriter: indentation, braces and semicolons are managed in one place."""
import pytest

from polyloop.codegen.writer import CodeWriter


def test_nested_blocks_indent_and_close():
    w = CodeWriter()
    with w.block("for (int64_t i = 0; i < n; i++)"):
        w.line("#pragma omp simd")
        with w.block("for (int64_t j = 0; j < n; j++)"):
            w.statement("A[i][j] = 0")
    assert w.text() == (
        "for (int64_t i = 0; i < n; i++) {\n"
        "    #pragma omp simd\n"
        "    for (int64_t j = 0; j < n; j++) {\n"
        "        A[i][j] = 0;\n"
        "    }\n"
        "}\n")


def test_chained_blocks_make_else_if_chains():
    w = CodeWriter()
    with w.block("if (a)"):
        w.statement("x = 1")
    with w.block("else if (b)", chained=True):
        w.statement("x = 2")
    with w.block("else", chained=True):
        w.statement("x = 3")
    assert w.text().splitlines() == ["if (a) {", "    x = 1;", "} else if (b) {", "    x = 2;",
                                     "} else {", "    x = 3;", "}"]


def test_chained_block_needs_a_closed_block_before_it():
    w = CodeWriter()
    w.statement("x = 1")
    with pytest.raises(ValueError, match="must follow a closed block"):
        with w.block("else", chained=True):
            pass


def test_blank_lines_never_double_or_open_a_block():
    w = CodeWriter()
    w.blank()
    with w.block("{ body"):
        w.blank()
        w.statement("x = 1")
        w.blank()
        w.blank()
        w.statement("y = 2")
    assert "\n\n\n" not in w.text()
    assert w.text().splitlines() == ["{ body {", "    x = 1;", "", "    y = 2;", "}"]


def test_multiline_comments_become_one_comment_per_line():
    w = CodeWriter()
    with w.indent():
        w.comment("first\nsecond")
    assert w.text() == "    // first\n    // second\n"
