# SPDX-License-Identifier: Apache-2.0
"""Build and run a sample of the fuzz corpus; meant to run in a process whose kernels are
compiled with sanitizers (test_sanitizers.py sets POLYLOOP_CFLAGS and preloads the runtimes).
Prints one line per case; any sanitizer report aborts the process."""
from __future__ import annotations

import random
import sys

import polyloop as pl

from polyloop.schedule.kernel import schedule_of
from schedule.test_prefetch_guarded import guarded_shift

from .corpus import PRIMITIVES, PROGRAMS, plan_step, run_both


def regressions():
    """Schedules that once read or wrote outside an array."""
    sch = PROGRAMS["guarded_shift"].schedule()      # a where-guarded read, cached
    sch.cache_read("P", "A", "global")
    yield "cache_read of a guarded read", sch, {"n": 5, "m": 7}
    sch = PROGRAMS["guarded_shift"].schedule()
    sch.cache_read("P", "A", "local")
    yield "cache_read of a guarded read into 'local'", sch, {"n": 4, "m": 3}
    sch = PROGRAMS["guarded_shift"].schedule()      # the guarded read, vectorized along j
    _, j = sch.get_loops("P")
    sch.vectorize(sch.split(j, factors=[None, 8])[1])
    yield "vectorized guarded read", sch, {"n": 5, "m": 19}
    yield "add_prefetch of guarded reads", schedule_of(guarded_shift(False)), {"n": 9, "m": 11}
    sch = PROGRAMS["gather"].schedule()             # indices read from data
    yield "gather", sch, {"n": 6, "m": 5}


def random_sample(count: int, seed: int):
    r = random.Random(seed)
    for k in range(count):
        name = sorted(PROGRAMS)[k % len(PROGRAMS)]
        sch = PROGRAMS[name].schedule()
        for _ in range(4):
            call = plan_step(sch, r.choice(PRIMITIVES), r.randrange(2**20))
            try:
                if call is not None:
                    call()
            except pl.ScheduleError:
                pass
        sizes = {p: r.randint(1, 11) for p in PROGRAMS[name].sizes}
        yield f"{name} {sch.trace.to_json()}", sch, sizes


def main() -> int:
    count, seed = int(sys.argv[1]), int(sys.argv[2])
    for label, sch, sizes in (*regressions(), *random_sample(count, seed)):
        mod = pl.build(sch)
        assert any(f.startswith("-fsanitize=") for f in mod.library.flags), mod.library.flags
        run_both(sch, mod, sizes, seed)
        print("ok", label[:200], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
