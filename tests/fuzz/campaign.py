# SPDX-License-Identifier: Apache-2.0
"""A long differential fuzzing campaign outside pytest: the checks of test_schedule_fuzz.py on
random schedules until ``--schedules`` accepted ones were built and compared, with figures and
every failure (program, steps, sizes, error) printed as JSON lines.

    PYTHONPATH=src:tests python -m fuzz.campaign --schedules 2000 --seed 1 > campaign.jsonl
"""
from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
import traceback

import polyloop as pl

from .corpus import (GPU_PRIMITIVES, PRIMITIVES, PROGRAMS, assert_total_expressions, plan_step,
                     run_both)

TARGET = "c"


TRACE_CASES = False


def one(r: random.Random, stats: collections.Counter) -> dict | None:
    """One random schedule built and compared; a dict describing the failure, or None."""
    name = r.choice(sorted(PROGRAMS))
    primitives = PRIMITIVES if TARGET == "c" else GPU_PRIMITIVES
    steps = [(r.choice(primitives), r.randrange(2**20)) for _ in range(r.randint(1, 6))]
    sizes = dict(zip(PROGRAMS[name].sizes, (r.randint(1, 13) for _ in range(3))))
    case = {"program": name, "steps": steps, "sizes": sizes}
    if TRACE_CASES:     # a crash of the process leaves the case that caused it
        print(json.dumps(case), file=sys.stderr, flush=True)
    stage = "schedule"
    try:
        sch = PROGRAMS[name].schedule()
        for primitive, choice in steps:
            call = plan_step(sch, primitive, choice)
            if call is None:
                continue
            before = str(sch)
            try:
                call()
                stats["steps accepted"] += 1
            except pl.ScheduleError:
                stats["steps refused"] += 1
                if str(sch) != before:
                    return case | {"stage": "refusal", "error": "a refusal changed the schedule"}
        stage = "expressions"
        assert_total_expressions(sch)
        stage = "print"
        str(sch)
        stage = "build"
        mod = pl.build(sch, target=TARGET)
        stage = "run"
        run_both(sch, mod, sizes, r.randrange(2**16))
        stage = "replay"
        if str(pl.Schedule.from_trace(sch.original, sch.trace.to_json())) != str(sch):
            return case | {"stage": stage, "error": "the trace replays to another schedule"}
    except Exception as e:   # every failure is recorded, whatever its type
        kind = ("wrong result" if isinstance(e, AssertionError) and stage == "run" else
                type(e).__name__)
        return case | {"stage": stage, "error": f"{kind}: {str(e)[:400]}",
                       "where": traceback.format_tb(e.__traceback__)[-1][:300]}
    stats["schedules compared"] += 1
    if any(not step.primitive.startswith("get_") for step in sch.trace):
        stats["transformed schedules compared"] += 1
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", action="store_true", help="print each case before it runs")
    parser.add_argument("--target", default="c", choices=("c", "opencl"))
    args = parser.parse_args(argv)
    global TRACE_CASES, TARGET
    TRACE_CASES, TARGET = args.trace, args.target
    r, stats = random.Random(args.seed), collections.Counter()
    start = time.time()
    while stats["schedules compared"] < args.schedules:
        failure = one(r, stats)
        stats["schedules"] += 1
        if failure is not None:
            stats[f"failed at {failure['stage']}"] += 1
            print(json.dumps(failure), flush=True)
        if stats["schedules"] % 100 == 0:
            print(json.dumps({"progress": dict(stats), "seconds": round(time.time() - start)}),
                  file=sys.stderr, flush=True)
    print(json.dumps({"figures": dict(stats), "seconds": round(time.time() - start)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
