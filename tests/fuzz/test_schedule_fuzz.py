# SPDX-License-Identifier: Apache-2.0
"""Differential schedule fuzzing: random programs from all three front ends x random sequences
of schedule primitives with random arguments. Every accepted schedule prints, builds, and
computes what the reference interpreter computes on the same fresh inputs with poisoned
outputs; every refused step leaves the schedule and its trace unchanged; the trace replays to
the same schedule. ``POLYLOOP_FUZZ_EXAMPLES=N`` runs N examples (random, not the fixed CI set)."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.config import CONFIG

from polyloop.runtime.opencl import platform_available

from .corpus import (GPU_PRIMITIVES, PRIMITIVES, PROGRAMS, assert_total_expressions, plan_step,
                     run_both)

hypothesis = pytest.importorskip("hypothesis", reason="the fuzzers use hypothesis")
st = hypothesis.strategies

# Per CI run: 200 random schedules on C; on OpenCL the fixed first 12 of the derandomized
# sequence (each builds an OpenCL program: about 10 s in all).
EXAMPLES = CONFIG.fuzz_examples or 200
OPENCL_EXAMPLES = CONFIG.fuzz_examples // 4 if CONFIG.fuzz_examples else 12
OPENCL, WHY = platform_available()


def random_schedule(name: str, steps) -> pl.Schedule:
    """Apply the steps that are accepted; a refused one must leave the schedule as it was."""
    sch = PROGRAMS[name].schedule()
    for primitive, choice in steps:
        call = plan_step(sch, primitive, choice)
        if call is None:
            continue
        before, trace = str(sch), sch.trace.to_json()
        try:
            call()
        except pl.ScheduleError:
            assert str(sch) == before, f"refused {primitive} changed the schedule"
            assert sch.trace.to_json() == trace, f"refused {primitive} changed the trace"
    assert_total_expressions(sch)
    return sch


@hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None,
                     derandomize=CONFIG.fuzz_examples is None,
                     suppress_health_check=list(hypothesis.HealthCheck),
                     phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
@hypothesis.given(name=st.sampled_from(sorted(PROGRAMS)),
                  steps=st.lists(st.tuples(st.sampled_from(PRIMITIVES), st.integers(0, 2**20)),
                                 min_size=1, max_size=6),
                  sizes=st.lists(st.integers(1, 13), min_size=2, max_size=2),
                  seed=st.integers(0, 2**16))
def test_accepted_random_schedules_equal_the_interpreter(name, steps, sizes, seed):
    sch = random_schedule(name, steps)
    mod = pl.build(sch)
    program = PROGRAMS[name]
    run_both(sch, mod, dict(zip(program.sizes, sizes)), seed)
    replay = pl.Schedule.from_trace(sch.original, sch.trace.to_json())
    assert str(replay) == str(sch)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
@hypothesis.settings(max_examples=max(OPENCL_EXAMPLES, 1), deadline=None, database=None,
                     derandomize=CONFIG.fuzz_examples is None,
                     suppress_health_check=list(hypothesis.HealthCheck),
                     phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
@hypothesis.given(name=st.sampled_from(sorted(PROGRAMS)),
                  steps=st.lists(st.tuples(st.sampled_from(GPU_PRIMITIVES),
                                           st.integers(0, 2**20)), min_size=1, max_size=5),
                  sizes=st.lists(st.integers(1, 13), min_size=2, max_size=2),
                  seed=st.integers(0, 2**16))
def test_accepted_random_schedules_on_opencl_equal_the_interpreter(name, steps, sizes, seed):
    sch = random_schedule(name, steps)
    mod = pl.build(sch, target="opencl")
    run_both(sch, mod, dict(zip(PROGRAMS[name].sizes, sizes)), seed)
