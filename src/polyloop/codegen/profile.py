# SPDX-License-Identifier: Apache-2.0
"""Profiling instrumentation of the C target: a timer around each loop nest of a kernel.

A *region* is a piece of the loop AST that gets a timer: each top-level nest of the function
(depth 1) and, with a larger depth, each stage of the sequence a region's loops lead to (the
pack, compute and write-back nests under a tile loop, depth 2 and more). Timers never enter a
vectorized, unrolled or GPU loop, nor a branch.

- Top-level regions run outside every parallel region: they read the monotonic clock (ns) and
  the time-stamp counter (ticks), so the runtime learns the counter's frequency from the same
  runs.
- Deeper regions may run inside an ``omp parallel for``: each thread adds its ticks to its own
  64-byte-aligned row of counters (no false sharing); the runtime sums the rows (thread time).

Nothing of this is emitted unless ``generate_c(..., profile=regions)`` is given regions. The
module reads its counters through ``int32_t pl_profile_read(int64_t *ns, int64_t *ticks,
int64_t *runs, int32_t reset)`` (returns the number of regions).

>>> from polyloop.ir.dtypes import DType
>>> from polyloop.ir.expr import Const, Var
>>> from polyloop.ir.loops import Block, For, Store
>>> i = Var("i")
>>> zero, four = Const(0, DType.INT64), Const(4, DType.INT64)
>>> body = Block((For("i", zero, four, Store("A", (i,), Const(0.0, DType.FLOAT32), None, "S")),
...               For("i", zero, four, Store("B", (i,), Const(1.0, DType.FLOAT32), None, "T"))))
>>> [r.label for r in profile_regions(body, depth=1)]
['S [i]', 'T [i]']
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..ir.loops import Block, Call, For, If, LoopKind, Node, Store, iter_nodes
from .writer import CodeWriter

THREAD_ROWS = 64          # per-thread counter rows; thread t uses row t % 64 (atomically)
_ROW_ALIGN = 8            # int64 counters per 64-byte cache line
_DESCEND = (LoopKind.SERIAL, LoopKind.PARALLEL)


@dataclass(frozen=True, slots=True, eq=False)
class ProfileRegion:
    """One timed piece of the loop AST: ``index`` in the counter table, ``depth`` 1 for a
    top-level nest, ``parent`` the index of the enclosing region, ``parallel`` whether it runs
    inside a parallel loop (its time is then summed over threads), ``complete`` whether every
    instance of its statements runs inside it (so that counting their domains counts its
    work)."""

    index: int
    depth: int
    parent: int | None
    label: str
    statements: tuple[str, ...]
    parallel: bool
    complete: bool
    node: Node


def profile_regions(body: Node, *, depth: int = 1) -> list[ProfileRegion]:
    """The regions to time: the top-level nests of ``body`` and, down to ``depth`` levels, the
    stages of the sequence under each region's loops (pre-order, parents first)."""
    if depth < 1:
        return []
    out: list[ProfileRegion] = []
    everywhere = _occurrences(body)
    _collect(body.body if isinstance(body, Block) else (body,), 1, depth, None, False,
             everywhere, out)
    return out


def _collect(nodes: tuple[Node, ...], level: int, depth: int, parent: int | None,
             parallel: bool, everywhere: dict[str, int], out: list[ProfileRegion]) -> None:
    for node in nodes:
        here = _occurrences(node)
        complete = bool(here) and all(everywhere[s] == n for s, n in here.items())
        region = ProfileRegion(len(out), level, parent, region_label(node), tuple(here),
                               parallel, complete, node)
        out.append(region)
        if level < depth:
            stages, inside_parallel = _stages(node)
            if len(stages) > 1:
                _collect(stages, level + 1, depth, region.index, parallel or inside_parallel,
                         everywhere, out)


def _stages(node: Node) -> tuple[tuple[Node, ...], bool]:
    """The sequence a chain of (serial or parallel) loops leads to, and whether a parallel loop
    is on the way."""
    parallel = False
    while (isinstance(node, For) and node.kind in _DESCEND) or _is_guard(node):
        parallel |= isinstance(node, For) and node.kind is LoopKind.PARALLEL
        node = node.then if isinstance(node, If) else node.body  # type: ignore[union-attr]
    return (node.body if isinstance(node, Block) else ()), parallel


def _is_guard(node: Node) -> bool:
    """A branch with no else around a nest (isl's test that a size is positive)."""
    return isinstance(node, If) and node.otherwise is None


def _occurrences(node: Node) -> dict[str, int]:
    """Statement -> how many stores and calls of it the subtree holds (first seen first)."""
    seen: dict[str, int] = {}
    for n in iter_nodes(node):
        if isinstance(n, (Store, Call)) and n.statement:
            seen[n.statement] = seen.get(n.statement, 0) + 1
    return seen


def region_label(node: Node) -> str:
    """``"C_init/C [i_0, k]"``: the statements a nest runs and the loops of its outer chain
    (``parallel`` marked), ``call f`` for a tensor intrinsic's call."""
    names = list(_occurrences(node))
    calls = sorted({n.function for n in iter_nodes(node) if isinstance(n, Call)})
    names += [f"call {c}" for c in calls]
    loops = []
    while isinstance(node, For) or _is_guard(node):
        if isinstance(node, For):
            loops.append(f"{node.var} parallel" if node.kind is LoopKind.PARALLEL else node.var)
        node = node.then if isinstance(node, If) else node.body  # type: ignore[union-attr]
    if len(names) > 3:   # a whole fused nest: its first and last statements
        names = [names[0], "...", names[-1], f"({len(names)} statements)"]
    text = "/".join(names[:3]) + (" " + names[3] if len(names) > 3 else "") \
        if names else "(no statement)"
    return f"{text} [{', '.join(loops)}]" if loops else text


def _row_width(count: int) -> int:
    return -(-max(count, 1) // _ROW_ALIGN) * _ROW_ALIGN


def emit_profile_prelude(w: CodeWriter, regions: list[ProfileRegion]) -> None:
    """The counter table, the clocks and ``pl_profile_read``."""
    n, width = len(regions), _row_width(len(regions))
    w.line("#include <time.h>")
    w.line("#include <omp.h>")
    w.comment(f"profile: {n} timed region(s); top-level ones in ns and ticks, deeper ones in "
              "ticks per thread row")
    w.statement(f"static int64_t pl_prof_ns[{width}]")
    w.statement(f"static _Alignas(64) int64_t pl_prof_ticks[{THREAD_ROWS}][{width}]")
    w.statement(f"static _Alignas(64) int64_t pl_prof_runs[{THREAD_ROWS}][{width}]")
    with w.block("static inline int64_t pl_prof_clock(void)"):
        w.statement("struct timespec t")
        w.statement("clock_gettime(CLOCK_MONOTONIC, &t)")
        w.statement("return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec")
    with w.block("static inline int64_t pl_prof_tick(void)"):
        w.line("#if defined(__x86_64__) || defined(__i386__)")
        w.statement("return (int64_t)__builtin_ia32_rdtsc()")
        w.line("#else")
        w.statement("return pl_prof_clock()")
        w.line("#endif")
    with w.block("static inline void pl_prof_add(int64_t *counter, int64_t value)"):
        w.statement("__atomic_fetch_add(counter, value, __ATOMIC_RELAXED)")
    with w.block("static inline int64_t pl_prof_take(int64_t *counter, int32_t reset)"):
        w.statement("return reset ? __atomic_exchange_n(counter, 0, __ATOMIC_RELAXED) "
                    ": __atomic_load_n(counter, __ATOMIC_RELAXED)")
    header = ("int32_t pl_profile_read(int64_t *ns, int64_t *ticks, int64_t *runs, "
              "int32_t reset)")
    with w.block(header):
        with w.block(f"for (int32_t k = 0; k < {n}; k++)"):
            w.statement("ns[k] = pl_prof_take(&pl_prof_ns[k], reset)")
            w.statement("ticks[k] = 0")
            w.statement("runs[k] = 0")
            with w.block(f"for (int32_t t = 0; t < {THREAD_ROWS}; t++)"):
                w.statement("ticks[k] += pl_prof_take(&pl_prof_ticks[t][k], reset)")
                w.statement("runs[k] += pl_prof_take(&pl_prof_runs[t][k], reset)")
        w.statement(f"return {n}")
    w.line()


def emit_timed(w: CodeWriter, region: ProfileRegion, emit_node: Callable[[], None]) -> None:
    """``{ start clocks; <the region's code>; add the elapsed time to its counters }``."""
    k = region.index
    top = region.depth == 1
    row = "0" if top else f"omp_get_thread_num() % {THREAD_ROWS}"
    with w.block(""):
        w.comment(f"profile region {k}: {region.label}")
        if top:
            w.statement(f"const int64_t pl_prof_ns_{k} = pl_prof_clock()")
        w.statement(f"const int64_t pl_prof_tk_{k} = pl_prof_tick()")
        emit_node()
        w.statement(f"const int pl_prof_row_{k} = {row}")
        w.statement(f"pl_prof_add(&pl_prof_ticks[pl_prof_row_{k}][{k}], "
                    f"pl_prof_tick() - pl_prof_tk_{k})")
        if top:
            w.statement(f"pl_prof_add(&pl_prof_ns[{k}], pl_prof_clock() - pl_prof_ns_{k})")
        w.statement(f"pl_prof_add(&pl_prof_runs[pl_prof_row_{k}][{k}], 1)")
