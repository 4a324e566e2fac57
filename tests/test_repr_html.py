# SPDX-License-Identifier: Apache-2.0
"""Programs, schedules and built modules display as highlighted HTML in Jupyter."""
from __future__ import annotations

import html

import pytest

import polyloop as pl
from polyloop.util.highlight import to_html

PROGRAM = pl.script('def scale(A: pl.Buffer[("n",), "float32"]):\n'
                    '    for i in range(n):\n        A[i] = A[i] * 2.0\n')


def _text(markup: str) -> str:
    """The visible text of the HTML: tags removed, entities decoded."""
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_program_schedule_and_module_render_their_text():
    sch = pl.auto_schedule(PROGRAM)
    mod = pl.build(sch)
    for obj, text in ((PROGRAM, str(PROGRAM)), (sch, str(sch)), (mod, mod.source)):
        markup = obj._repr_html_()
        assert markup.startswith("<pre ") and markup.endswith("</pre>")
        assert _text(markup) == text


def test_tokens_are_coloured():
    markup = to_html("for i in range(n):  # a comment\n    A[i] = 2.5", "python")
    assert '<span style="color:#d73a49;font-weight:bold">for</span>' in markup
    assert '<span style="color:#6f42c1">range</span>' in markup
    assert '<span style="color:#005cc5">2.5</span>' in markup
    assert "font-style:italic\"># a comment</span>" in markup


def test_c_directives_and_escaping():
    markup = to_html('#include <math.h>\nif (a < b && c) { x = "s"; }  // done', "c")
    assert "&lt;math.h&gt;" in markup and "&amp;&amp;" in markup
    assert _text(markup) == '#include <math.h>\nif (a < b && c) { x = "s"; }  // done'


def test_unknown_language():
    with pytest.raises(ValueError, match="unknown language"):
        to_html("x", "rust")
