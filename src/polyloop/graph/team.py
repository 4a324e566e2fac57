# SPDX-License-Identifier: Apache-2.0
"""One parallel region per run of kernels: how a model's entry runs its kernels as a team.

A stand-alone kernel opens its own OpenMP region (``#pragma omp parallel for``); a model of
a hundred small kernels would pay a hundred thread wake-ups and joins per call. The entry
instead opens one region for each run of consecutive kernels that can share it, and every
thread of the team calls each kernel in turn (``codegen.team``):

- a SHARED kernel's team variant runs this thread's part of its parallel loop;
- a ONE_THREAD kernel (no parallel loop) runs whole on the first thread, so a chain of them
  needs no wait between them;
- an ALONE kernel (any other form) ends the run: it runs between regions, on its own region,
  as in a stand-alone module. A run without a SHARED kernel opens no region at all.

Threads wait for each other only where a kernel touches memory an earlier kernel of the run
wrote (or writes memory one read) since the last wait (``barriers``): independent consecutive
kernels, the branches of a block, run without one. The wait (``pl_team_wait``) spins for at
most ``TEAM_SPIN_NS`` and then sleeps on a condition variable: inside one call every thread
has work coming, but a thread whose partner lost its core stops burning its own. Nothing
spins once the entry has returned: between calls the threads sleep as OpenMP's passive policy
has them (``runtime/openmp.py``).

A kernel that fails (status not 0: a size check, an allocation) records its status; later
kernels of the region are skipped, every thread still passes every wait, and the entry
returns the first status.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..codegen.team import TeamRole, team_symbol
from .ir import Value
from .memory import MemoryPlan

# how long a thread spins at a wait between two kernels before it sleeps
TEAM_SPIN_NS = 20_000
# the thread that runs the kernels without a parallel loop: all on one, so that a chain of
# them (a squeeze-excitation) needs no wait and hands no data between cores
ONE_THREAD = 0

TEAM_RUNTIME = r"""
/* Waiting between the kernels of one parallel region (graph/team.py): spin for at most
   PL_TEAM_SPIN_NS, then sleep until the last thread arrives. */
#define PL_TEAM_SPIN_NS %(spin)d
typedef struct {
    atomic_int arrived, status;
    atomic_uint phase;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} pl_team;
#define PL_TEAM_INIT {0, 0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER}

static inline void pl_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void pl_team_wait(pl_team *t, int32_t threads) {
    if (threads < 2) return;
    const unsigned phase = atomic_load_explicit(&t->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&t->arrived, 1, memory_order_acq_rel) == threads - 1) {
        atomic_store_explicit(&t->arrived, 0, memory_order_relaxed);
        pthread_mutex_lock(&t->lock);
        atomic_store_explicit(&t->phase, phase + 1, memory_order_release);
        pthread_cond_broadcast(&t->wake);
        pthread_mutex_unlock(&t->lock);
        return;
    }
    const int64_t until = pl_now_ns() + PL_TEAM_SPIN_NS;
    for (int spin = 1; atomic_load_explicit(&t->phase, memory_order_acquire) == phase; spin++) {
        if (spin %% 64 == 0 && pl_now_ns() > until) {
            pthread_mutex_lock(&t->lock);
            while (atomic_load_explicit(&t->phase, memory_order_acquire) == phase)
                pthread_cond_wait(&t->wake, &t->lock);
            pthread_mutex_unlock(&t->lock);
            return;
        }
        pl_pause();
    }
}

static inline int pl_team_failed(pl_team *t) {
    return atomic_load_explicit(&t->status, memory_order_relaxed) != 0;
}

static inline void pl_team_report(pl_team *t, int32_t status) {
    int none = 0;
    if (status) atomic_compare_exchange_strong(&t->status, &none, status);
}
""" % {"spin": TEAM_SPIN_NS}

TEAM_INCLUDES = ("omp.h", "pthread.h", "stdatomic.h")


def team_runs(roles: Sequence[TeamRole]) -> list[tuple[int, ...]]:
    """The steps (by index) grouped into runs: each ALONE step by itself, the others in runs
    of consecutive steps.

    >>> S, O, A = TeamRole.SHARED, TeamRole.ONE_THREAD, TeamRole.ALONE
    >>> team_runs([S, O, A, S, A, A])
    [(0, 1), (2,), (3,), (4,), (5,)]
    """
    runs: list[tuple[int, ...]] = []
    current: list[int] = []
    for k, role in enumerate(roles):
        if role is TeamRole.ALONE:
            if current:
                runs.append(tuple(current))
                current = []
            runs.append((k,))
        else:
            current.append(k)
    if current:
        runs.append(tuple(current))
    return runs


def barriers(reads: Sequence[set], writes: Sequence[set],
             threads: Sequence[int | None]) -> list[bool]:
    """For each step of a run, whether the team waits before it: it reads or writes storage
    a step since the last wait wrote, or writes storage one read, unless both steps run on
    the same one thread (``threads[k]``: that thread, or None for a step every thread runs;
    one thread sees its own writes in program order). The region's start and end are waits.

    >>> # two independent kernels; one reading the first's result; one overwriting what it read
    >>> barriers([{"x"}, {"x"}, {"a"}, {"b"}], [{"a"}, {"b"}, {"c"}, {"a"}], [None] * 4)
    [False, False, True, True]
    >>> barriers([{"x"}, {"a"}, {"b"}], [{"a"}, {"b"}, {"c"}], [0, 0, None])   # a chain on 0
    [False, False, True]
    """
    written: list[tuple[set, int | None]] = []
    read: list[tuple[set, int | None]] = []
    waits = []
    for r, w, t in zip(reads, writes, threads):
        wait = any((r | w) & s and (t is None or t != u) for s, u in written) or \
            any(w & s and (t is None or t != u) for s, u in read)
        if wait:
            written, read = [], []
        waits.append(wait)
        written.append((w, t))
        read.append((r, t))
    return waits


def storage(values: Sequence[Value], plan: MemoryPlan) -> set:
    """Where ``values`` live: distinct keys never overlap in memory (a view is its base's)."""
    return {(plan.storage[v.name].where, plan.storage[v.name].index) for v in values}


def region_lines(name: str, steps: Sequence, indices: Sequence[int], plan: MemoryPlan,
                 call: object) -> Iterator[str]:
    """The C lines of one region running ``steps[k]`` for ``k in indices``. ``call(step)``
    gives ``(argument lines, call expression)``: the arrays ``a`` and ``p`` and the call of the
    step's function with them."""
    run = [steps[k] for k in indices]
    waits = barriers([storage(s.args[:len(s.args) - s.outputs], plan) for s in run],
                     [storage(s.args[len(s.args) - s.outputs:], plan) for s in run],
                     [ONE_THREAD if s.role is TeamRole.ONE_THREAD else None for s in run])
    yield "    {"
    yield "        pl_team team = PL_TEAM_INIT;"
    # read once: every thread must pass the same waits, whatever Python sets meanwhile
    yield f"        const int32_t profiling = {name}_profiling;"
    yield "        #pragma omp parallel"
    yield "        {"
    yield "            const int32_t pl_thread = omp_get_thread_num(), " \
          "pl_threads = omp_get_num_threads();"
    yield "            int64_t t0 = profiling ? pl_now_ns() : 0; (void)t0;"
    for k, s, wait in zip(indices, run, waits):
        if wait:
            yield "            if (!profiling) pl_team_wait(&team, pl_threads);"
        arrays, params = call(s)
        lead = ONE_THREAD
        yield f"            {{   /* {s.role.value} */"
        yield f"                {arrays}"
        yield f"                {params}"
        if s.role is TeamRole.SHARED:
            yield ("                if (!pl_team_failed(&team)) pl_team_report(&team, "
                   f"{team_symbol(s.function)}(a, p, pl_thread, pl_threads, {lead}));")
        else:
            yield (f"                if (pl_thread == {lead} && !pl_team_failed(&team)) "
                   f"pl_team_report(&team, {s.function}(a, p));")
        yield "            }"
        yield "            if (profiling) {"
        yield "                pl_team_wait(&team, pl_threads);"
        yield "                if (pl_thread == 0) {"
        yield f"                    const int64_t t1 = pl_now_ns(); " \
              f"{name}_step_ns[{k}] += t1 - t0; t0 = t1;"
        yield "                }"
        yield "            }"
    yield "        }"
    yield "        status = atomic_load(&team.status);"
    yield "        if (status) return status;"
    yield "    }"
