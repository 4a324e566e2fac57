# SPDX-License-Identifier: Apache-2.0
"""A trace read from JSON may come from a shared tuning database: it runs no code of its own.

Index maps (``transform_layout``) are read back against a whitelist, primitives must be
schedule primitives, and anything malformed is a ``ParseError``.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import polyloop as pl
from polyloop.schedule.index_map import parse_index_map


def layout_program():
    n = pl.var("n")
    A = pl.placeholder((n, 32), "float32", name="A")
    return pl.compute((n, 32), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")


def layout_trace(index_map: str) -> str:
    return json.dumps([{"primitive": "transform_layout",
                        "args": [{"block": "B"}, "A", {"lambda": index_map}],
                        "kwargs": {}, "results": []}])


def test_a_recorded_index_map_replays_to_the_same_schedule_and_results(rng):
    B = layout_program()
    sch = pl.Schedule(B)
    sch.transform_layout("B", "A", lambda i, j: (j // 16, i, j % 16))
    again = pl.Schedule.from_trace(B, sch.trace.to_json())
    assert str(again) == str(sch)
    a = rng.standard_normal((7, 32), dtype="float32")
    out = np.full((7, 32), np.nan, "float32")
    pl.build(again)(a, out)
    np.testing.assert_array_equal(out, a * 2 + 1)


def test_min_max_and_negation_are_read_back():
    fn = parse_index_map("lambda x0, x1: (max(x0, 3) - min(x1, -x0), x1 % 4 * 2 + x0 // 8,)")
    assert len(fn(pl.var("p"), pl.var("q"))) == 2


# payloads that ran under the former eval (builtins removed, but object's subclasses reachable)
ESCAPE = ("lambda x0, x1: ([c for c in ().__class__.__base__.__subclasses__() "
          "if c.__name__ == '_wrap_close'][0].__init__.__globals__['system']"
          "('touch {path}'), x0, x1)")
OTHERS = ["lambda x0, x1: (__import__('os').system('touch {path}'), x0, x1)",
          "lambda x0, x1: (open('{path}', 'w'), x0, x1)",
          "lambda x0, x1: (x0.__class__, x1, 0)",
          "lambda x0, x1=1: (x0, x1, 0)",
          "lambda x0, x1: (x0 ** 2, x1, 0)",
          "lambda x0, x1: (x0, x1, 1.5)",
          "lambda x0, x1: (y, x1, 0)",
          "(lambda: 0)()",
          "lambda x0, x1: (" + "(" * 500 + "x0" + ")" * 500 + ", x1, 0)"]


@pytest.mark.parametrize("payload", [ESCAPE, *OTHERS])
def test_a_malicious_index_map_is_refused_and_runs_nothing(tmp_path, payload):
    path = tmp_path / "pwned"
    with pytest.raises(pl.ParseError, match="index map in a trace"):
        pl.Schedule.from_trace(layout_program(), layout_trace(payload.format(path=path)))
    assert not path.exists()


@pytest.mark.parametrize("text, message", [
    ("[1", "not JSON"),
    ('{"primitive": "split"}', "list of steps"),
    ('[{"primitive": "__init__", "args": [], "kwargs": {}, "results": []}]',
     "not a schedule primitive"),
    ('[{"primitive": "copy", "args": [], "kwargs": {}, "results": []}]',
     "not a schedule primitive"),
    ('[{"primitive": "split", "args": 3, "kwargs": {}, "results": []}]', "step 0"),
    ('[{"primitive": "get_loops", "args": [{"block": "B"}], "kwargs": {"x y": 1}, '
     '"results": []}]', "keyword"),
    ('[{"primitive": "get_loops", "args": [{"block": "B"}, 1, 2, 3], "kwargs": {}, '
     '"results": []}]', "from_trace"),
])
def test_malformed_traces_are_parse_errors(text, message):
    with pytest.raises(pl.PolyloopError, match=message):
        pl.Schedule.from_trace(layout_program(), text)
