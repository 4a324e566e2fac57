# SPDX-License-Identifier: Apache-2.0
"""TVM's CPU tutorials and the MLC course's schedules, as the tutorials write them, timed in
polyloop and in Apache TVM 0.27 in one run; Loo.py's tutorial kernels against Loo.py.

    python benchmarks/tvm_tutorials/run.py                       # everything, 1 and 2 threads
    python benchmarks/tvm_tutorials/run.py --tutorials opt_gemm --threads 1 --rounds 5
    python benchmarks/tvm_tutorials/run.py --small --no-time     # build and check every port
    python benchmarks/tvm_tutorials/run.py --tutorials loopy --loopy-python /path/to/python

Every result (both tools) is checked against NumPy on poisoned outputs before it is timed.
Figures: the least of ``--repeat`` timings per round, the best of ``--rounds`` rounds that visit
every row in turn, so both tools of a row are measured close together. A timing is enough
calls to last 20 ms, by default in each tool's own native loop (the C loop polyloop's
``Module.benchmark`` runs, TVM's ``time_evaluator``: as the tutorials time, without Python's
call; ``--calls python`` calls from Python, argument checks included), by the wall clock or
(``--clock cpu``, one thread) the calling thread's CPU time, which leaves out waiting for a
core on a loaded machine. ``ratio`` is the reference's time over polyloop's: >= 1 means polyloop
is at least as fast. TVM's thread pool is sized and left unpinned as in
``benchmarks/schedule_parity.py``; polyloop's OpenMP threads wait as in a process of its own
(``wait_as_polyloop_would``: importing TVM would otherwise leave them spinning). Loo.py needs islpy < 2026, which polyloop cannot share a
process with: its kernels run in a separate Python (``--loopy-python``, by default
``$POLYLOOP_LOOPY_PYTHON``) driven over a pipe (``loopy_worker.py``).
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):      # run as a script: make the package importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "tvm_tutorials"   # noqa: A001

import polyloop as pl   # noqa: E402
from polyloop.bench.peers import aligned_copy, load_tvm   # noqa: E402
from polyloop.bench.tvm_ref import tvm_target   # noqa: E402
from polyloop.runtime.module import apply_thread_count   # noqa: E402

from tvm_tutorials.common import Port, as_list, check, poisoned   # noqa: E402

TUTORIALS = ("opt_gemm", "templates", "conv2d", "reduction", "scan", "extern", "tensorize",
             "intrin_math", "mlc_ch2", "mlc_ch3", "mlc_ch4")


def load_ports(names: list[str], small: bool) -> list[Port]:
    """The ports of the tutorials ``names``, at the tutorial's sizes or (``small``) at small
    sizes that do not divide the tiles where the tutorial allows it."""
    out: list[Port] = []
    for name in names:
        mod = importlib.import_module(f"tvm_tutorials.{name}")
        out.extend(mod.small_ports() if small else mod.ports())
    return out


# -- building and checking --------------------------------------------------------------------

@dataclass
class Built:
    """A compiled port: ``call()`` runs it once from Python, ``outputs()`` reads the results,
    ``loop(n)`` runs it ``n`` times in a native loop (polyloop's C loop that
    ``Module.benchmark`` times, TVM's ``time_evaluator``): what the tutorials time, without
    Python's call."""
    call: Callable[[], object]
    outputs: Callable[[], list[np.ndarray]]
    set_threads: Callable[[int], None]
    loop: Callable[[int], object] | None = None
    # a tool timed in another process (Loo.py): (repeat, clock) -> seconds per call
    remote: Callable[[int, str], float] | None = None


def build_polyloop(port: Port, inputs: list[np.ndarray]) -> Built:
    made = port.polyloop()
    if callable(made) and not isinstance(made, (pl.Tensor, pl.Program)):
        return _graph(made, inputs)         # a built graph (pl.graph.build): call it
    mod = pl.build(made)
    outs = [aligned_copy(o) for o in poisoned(port.outputs)]
    args = [aligned_copy(a) for a in inputs]
    lib = ctypes.CDLL(str(mod.library.path)) if getattr(mod, "library", None) else None
    mod(*args, *outs)

    def threads(t: int) -> None:
        if lib is not None:
            apply_thread_count(lib, t)
    return Built(lambda: mod(*args, *outs), lambda: [o.copy() for o in outs], threads,
                 _native_loop(mod, lib, args + outs))


def _graph(executor: Any, inputs: list[np.ndarray]) -> Built:
    """A graph executor: called on the inputs, it returns its outputs."""
    args = [aligned_copy(a) for a in inputs]
    last: list[Any] = [executor(*args)]

    library = getattr(executor, "library", None)
    lib = ctypes.CDLL(str(library.path)) if library is not None else None

    def call() -> None:
        last[0] = executor(*args)

    def threads(t: int) -> None:
        if lib is not None:
            apply_thread_count(lib, t)
    return Built(call, lambda: [np.array(o) for o in as_list(last[0])], threads)


def _native_loop(mod: Any, lib: Any, arrays: list[np.ndarray]) -> Callable[[int], object] | None:
    """``n`` calls of a C module's kernel in its C loop (``pl_repeat_<entry>``, which
    ``Module.benchmark`` uses), on arrays already checked by a call (its sizes:
    ``_last_params``)."""
    repeat = getattr(lib, f"pl_repeat_{getattr(mod, 'entry', '')}", None) if lib else None
    if repeat is None:
        return None
    repeat.restype = ctypes.c_int32
    pointers = (ctypes.c_void_p * len(arrays))(*(a.ctypes.data for a in arrays))
    params = mod._last_params      # noqa: SLF001 - the sizes of the checked call above

    def loop(n: int) -> None:
        if repeat(pointers, params, ctypes.c_int64(n)):
            raise RuntimeError(f"{mod.entry} failed")
    return loop


def build_tvm(tvm: Any, port: Port, inputs: list[np.ndarray], threads: int) -> Built:
    assert port.tvm is not None
    made = port.tvm(tvm)
    if callable(made) and not hasattr(made, "script"):    # the port runs TVM itself
        runner = made(threads)
        return Built(runner[0], runner[1], lambda t: None)
    lib = tvm.compile(made, target=tvm_target(threads))
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(aligned_copy(a), dev) for a in inputs]
    outs = [tvm.runtime.tensor(o, dev) for o in poisoned(port.outputs)]
    lib(*args, *outs)
    pool = tvm.get_global_func("runtime.config_threadpool")
    module = lib.jit()
    timers: dict[int, Any] = {}

    def loop(n: int) -> None:
        # time_evaluator calls the function once more before the ``number`` it times
        if n not in timers:
            timers[n] = module.time_evaluator(module.entry_name or "main", dev,
                                              number=max(1, n - 1), repeat=1, min_repeat_ms=0)
        timers[n](*args, *outs)
    return Built(lambda: lib(*args, *outs), lambda: [o.numpy() for o in outs],
                 lambda t: pool(1, t), loop)


# -- timing -----------------------------------------------------------------------------------

MIN_TIME = 0.02      # seconds of calls per timing


def per_call(loop: Callable[[int], object], call: Callable[[], object], repeat: int,
             clock: str) -> float:
    """Least seconds per call over ``repeat`` timings of ``loop(n)``, ``n`` calls lasting at
    least ``MIN_TIME`` (counted from calls of ``call``, then run once untimed: a native loop's
    first run may cost more); ``clock`` "cpu": the calling thread's CPU time (one-thread
    kernels run in the caller: time spent waiting for a core is left out)."""
    timer = time.thread_time if clock == "cpu" else time.perf_counter
    call()
    n, elapsed = 0, 0.0
    while elapsed < MIN_TIME / 4 and n < 1 << 20:
        start = timer()
        call()
        elapsed += timer() - start
        n += 1
    n = max(2, min(1 << 22, math.ceil(MIN_TIME / max(elapsed / n, 1e-9))))
    loop(n)
    best = math.inf
    for _ in range(repeat):
        start = timer()
        loop(n)
        best = min(best, (timer() - start) / n)
    return best


def measure(built: Built, threads: int, repeat: int, clock: str, calls: str) -> float:
    if built.remote is not None:
        return built.remote(repeat, clock)
    built.set_threads(threads)
    loop = built.loop if calls == "native" and built.loop is not None else \
        (lambda n: [built.call() for _ in range(n)])
    return per_call(loop, built.call, repeat, clock)


@dataclass
class Row:
    tutorial: str
    name: str
    threads: int
    reference: str
    ours: Built
    theirs: Built | str
    best: dict[str, float] = field(default_factory=lambda: {"ours": math.inf, "theirs": math.inf})


def rows_for(ports: list[Port], threads: list[int], tvm: Any, tvm_why: str,
             rng: np.random.Generator) -> list[Row]:
    rows = []
    for port in ports:
        inputs = port.inputs(rng)
        ours = build_polyloop(port, inputs)
        check(port, "polyloop", ours.outputs(), inputs)
        for t in threads:
            theirs: Built | str = tvm_why if tvm is None else "-"
            if tvm is not None and port.tvm is not None:
                theirs = build_tvm(tvm, port, inputs, t)
                try:
                    check(port, "TVM", theirs.outputs(), inputs)
                except AssertionError as e:     # the reference's bug: shown, not timed
                    theirs = "TVM wrong: " + str(e).rpartition(": ")[2]
            rows.append(Row(port.tutorial, port.name, t, "TVM", ours, theirs))
    return rows


def time_rows(rows: list[Row], rounds: int, repeat: int, clock: str, calls: str) -> None:
    for _ in range(rounds):
        for row in rows:
            row.best["ours"] = min(row.best["ours"],
                                   measure(row.ours, row.threads, repeat, clock, calls))
            if isinstance(row.theirs, Built):
                row.best["theirs"] = min(row.best["theirs"],
                                         measure(row.theirs, row.threads, repeat, clock, calls))


def table(rows: list[Row], markdown: bool) -> str:
    head = ("tutorial", "step", "threads", "polyloop ms", "reference ms", "ratio")
    lines = []
    for r in rows:
        ours = r.best["ours"] * 1e3
        if isinstance(r.theirs, Built):
            theirs = r.best["theirs"] * 1e3
            cells = (f"{theirs:.3f} ({r.reference})", f"{theirs / ours:.2f}x")
        else:
            cells = (r.theirs, "")
        lines.append((r.tutorial, r.name, str(r.threads), f"{ours:.3f}", *cells))
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        return "\n".join(out)
    widths = [max(len(x[k]) for x in [head, *lines]) for k in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(head), *(fmt(c) for c in lines)])


def wait_as_polyloop_would() -> None:
    """Ask OpenMP for the waiting polyloop asks for in a process of its own (passive, unless
    the user chose: ``runtime/openmp.py``). Importing TVM imports PyTorch, whose GNU OpenMP
    runtime starts before polyloop's first kernel loads, and a running runtime keeps its
    settings: polyloop's kernels would spin-wait between regions. TVM's thread pool is its own
    (not OpenMP's), so this changes nothing on TVM's side."""
    if pl.config.CONFIG.omp_waiting is None:
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tutorials", nargs="*", default=[*TUTORIALS, "loopy"])
    p.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="cpu: the calling thread's CPU time (--threads 1 only)")
    p.add_argument("--calls", choices=["native", "python"], default="native",
                   help="native: each tool's own loop of calls (its timer's); python: calls "
                        "from Python, argument checks included")
    p.add_argument("--small", action="store_true", help="small sizes (what the test checks)")
    p.add_argument("--no-time", action="store_true", help="build and check only")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--no-tvm", action="store_true", help="polyloop only (no reference)")
    p.add_argument("--loopy-python", default=None,
                   help="a Python with loopy 2025.2 (islpy < 2026) for the Loo.py kernels")
    args = p.parse_args(argv)
    if args.clock == "cpu" and args.threads != [1]:
        p.error("--clock cpu measures the calling thread only: use it with --threads 1")
    rng = np.random.default_rng(0)
    wait_as_polyloop_would()
    peer = load_tvm(max(args.threads)) if not args.no_tvm else None
    names = [t for t in args.tutorials if t != "loopy"]
    rows = rows_for(load_ports(names, args.small), args.threads,
                    peer.module if peer is not None and peer.available else None,
                    peer.version if peer is not None else "not asked for", rng)
    if "loopy" in args.tutorials:
        from tvm_tutorials.loopy_ports import loopy_rows
        rows += loopy_rows(args.threads, args.small, args.loopy_python, rng)
    if args.no_time:
        print(f"{len(rows)} rows built and checked against NumPy")
        return
    time_rows(rows, args.rounds, args.repeat, args.clock, args.calls)
    print(f"TVM {peer.version if peer is not None else '-'}; {args.calls} calls, {args.clock} clock, best of {args.rounds} interleaved rounds of "
          f"the least of {args.repeat} timings; ratio = reference time / polyloop time")
    print(table(rows, args.markdown))


if __name__ == "__main__":
    # run the package's copy of this module: the ports' modules import it (one Built, one Row)
    importlib.import_module("tvm_tutorials.run").main()
