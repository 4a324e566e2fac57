# SPDX-License-Identifier: Apache-2.0
"""Parser fuzzing: loop domains, kernel instructions, script sources and traces, generated
from grammars and mutated from valid seeds, each run in a worker process with a time limit.

Every input must be accepted or refused with a ``PolyloopError``: a foreign exception, a crash
of the worker or a hang fails the test with the input. CI runs ``DEFAULT_EXAMPLES`` inputs per
test; ``POLYLOOP_FUZZ_EXAMPLES=N`` runs N per test (a long campaign: see docs/reliability.md).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from polyloop.config import CONFIG

from .parser_inputs import (DOMAIN_SEEDS, INSTRUCTION_SEEDS, SCRIPT_SEEDS, domains,
                            instructions, mutated, scripts)
from .parser_pool import ParserPool

DEFAULT_EXAMPLES = 80
EXAMPLES = CONFIG.fuzz_examples or DEFAULT_EXAMPLES
# no shrinking: every input costs a round trip to the worker (a hang costs the time limit),
# and the failing inputs are reported whole, all of them, at the end of the test
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.fixture(scope="module")
def pool():
    p = ParserPool()
    yield p
    p.close()
    print(f"\nparser fuzzing, outcomes: {json.dumps(dict(sorted(p.counts.items())))}")


@pytest.fixture
def failures(pool):
    """The inputs of one test that failed; the test fails after all its inputs ran."""
    found: list[str] = []
    yield found
    assert not found, f"{len(found)} failing input(s):\n" + "\n\n".join(found[:10])


def check(pool: ParserPool, failures: list[str], kind: str, text: str, extra: str = "") -> None:
    out = pool.run(kind, text, extra)
    if not out.ok:
        failures.append(f"{out.verdict} on {kind} input {text!r:.2000} (with {extra!r:.300}):"
                        f"\n{out.detail}")


def _seed_pair(seeds: list[tuple[str, str]], mutate_first: bool):
    def one(pair: tuple[str, str]) -> st.SearchStrategy[tuple[str, str]]:
        if mutate_first:
            return mutated(pair[0]).map(lambda t: (t, pair[1]))
        return mutated(pair[1]).map(lambda t: (pair[0], t))
    return st.one_of([one(p) for p in seeds])


@FUZZ
@given(st.one_of(domains(), _seed_pair(DOMAIN_SEEDS, True), _seed_pair(INSTRUCTION_SEEDS, True)))
def test_loop_domains(pool, failures, case):
    domain, body = case
    check(pool, failures, "domain", domain, body)


@FUZZ
@given(st.one_of(instructions(), _seed_pair(INSTRUCTION_SEEDS, False),
                 _seed_pair(DOMAIN_SEEDS, False)))
def test_kernel_instructions(pool, failures, case):
    domain, body = case
    check(pool, failures, "instructions", body, domain)


@FUZZ
@given(st.one_of(scripts(), st.one_of([mutated(s) for s in SCRIPT_SEEDS])))
def test_script_sources(pool, failures, source):
    check(pool, failures, "script", source)


TRACE_SEED = json.dumps([
    {"primitive": "get_loops", "args": [{"block": "B"}], "kwargs": {},
     "results": [{"loop": 1, "name": "i"}, {"loop": 2, "name": "j"}]},
    {"primitive": "split", "args": [{"loop": 2, "name": "j"}], "kwargs": {"factors": [None, 4]},
     "results": [{"loop": 3, "name": "j_0"}, {"loop": 4, "name": "j_1"}]},
    {"primitive": "transform_layout", "args": [{"block": "B"}, "A",
                                               {"lambda": "lambda x0, x1: (x1 // 4, x0, x1 % 4,)"}],
     "kwargs": {}, "results": []}])


@FUZZ
@given(mutated(TRACE_SEED))
def test_traces(pool, failures, trace):
    check(pool, failures, "trace", trace, SCRIPT_SEEDS[0])
