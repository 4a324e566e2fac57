# SPDX-License-Identifier: Apache-2.0
"""The ``polyloop`` command line: ``polyloop demo``, ``polyloop bench``, ``polyloop tune``,
``polyloop rpc`` and ``polyloop version``.

``polyloop demo`` walks the whole path on two workloads, matmul + ReLU and a row softmax: the
algorithm, its schedule from ``polyloop.ops`` (shown as the trace of primitives it applied),
the scheduled loop nest, the generated C, a check against NumPy and a timing table next to
NumPy's time for the same computation.

>>> from polyloop.cli import main
>>> main(["demo", "--size", "64"])  # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import functools
import logging
import os
import platform
import sys
import time
from collections.abc import Sequence

import numpy as np

from .. import bench, graph
from ..errors import PolyloopError
from ..tune.command import load_program, tune_with_progress
from ..util.units import format_time
from .rpc import add_rpc_commands
from .demo import CASES, DemoFailure, package_version, run_case, usable_cores, versions


def cmd_version(args: argparse.Namespace) -> int:
    print(versions())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    emit = functools.partial(print, flush=True)
    emit(f"{versions()}\n{platform.machine()}, {usable_cores()} cores usable; OpenMP uses all of "
         "them, and so does NumPy's BLAS.\nSizes are compile-time constants here, so each kernel "
         "is specialized to them (use pl.var for size-generic kernels).\n")
    failures = []
    for number, case in enumerate(CASES, start=1):
        n = args.size or case.default_size
        try:
            run_case(number, case, n, repeat=args.repeat, emit=emit)
        except DemoFailure as e:
            failures.append(str(e))
            print(f"\npolyloop demo: FAILED: {e}", file=sys.stderr, flush=True)
    if failures:
        print(f"\npolyloop demo: {len(failures)} of {len(CASES)} workloads gave wrong results:\n  "
              + "\n  ".join(failures), file=sys.stderr)
        return 1
    emit("polyloop demo: all results match NumPy.")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    pool = bench.QUICK if args.quick else bench.WORKLOADS
    workloads = bench.select(args.workloads, pool)
    peers = tuple(args.peers.split(",")) if args.peers else bench.run.PEERS
    unknown = [p for p in peers if p not in bench.run.PEERS]
    if unknown:
        raise PolyloopError(f"--peers: unknown reference(s) {unknown}; choose among "
                            + ",".join(bench.run.PEERS))
    if args.profile:
        from ..bench.profile import profile_benchmarks
        print(profile_benchmarks(workloads, peers=peers, repeat=args.repeat,
                                 threads=args.threads, quick=args.quick,
                                 limits=not args.no_limits, perf=not args.no_perf))
        return 0
    records, limits = bench.run_benchmarks(
        workloads, repeat=args.repeat, rounds=args.rounds, peers=peers, threads=args.threads,
        quick=args.quick, limits=not args.no_limits, stat=args.stat)
    if args.json:
        print(bench.to_json(records, limits))
    else:
        print(f"polyloop bench  {time.strftime('%Y-%m-%d')}  {versions()}\n"
              f"{platform.machine()}, {usable_cores()} cores usable; float32; PyTorch on "
              f"{args.threads} threads; {args.stat} of {args.repeat} timings, best of "
              f"{args.rounds} interleaved round(s)\n")
        print(bench.table(records, limits, stat=args.stat))
    if args.plot:
        title = (f"polyloop bench {time.strftime('%Y-%m-%d')}: speed relative to PyTorch "
                 f"({args.threads} threads, float32)")
        print(f"polyloop bench: chart written to {bench.plot(records, args.plot, title=title)}",
              file=sys.stderr)
    return 0


def _load_model(path: str, batch: str | None):
    return graph.build(graph.from_onnx(path, batch=batch))


def cmd_compile(args: argparse.Namespace) -> int:
    ex = _load_model(args.model, args.batch)
    so, header = ex.export_library(args.output)
    print(f"wrote {so} and {header}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    ex = _load_model(args.model, args.batch)
    try:
        inputs = [np.load(p) for p in args.input]
    except (OSError, ValueError) as e:
        raise PolyloopError(f"cannot read the input arrays {args.input}: {e}") from None
    outs = ex(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for k, y in enumerate(outs):
        if args.output:
            np.save(args.output if len(outs) == 1 else f"{args.output}.{k}.npy", y)
        print(f"output {k}: {y.dtype}{list(y.shape)}")
        print(np.array2string(y, threshold=20, precision=5))
    if args.benchmark:
        print(f"median time: {format_time(ex.benchmark(*inputs))}")
    return 0


def _add_graph_commands(commands) -> None:
    comp = commands.add_parser("compile", help="compile an ONNX model into a shared library "
                               "with a C header (weights embedded)")
    comp.add_argument("model", help="the .onnx file")
    comp.add_argument("-o", "--output", required=True, metavar="SO", help="the library to write")
    comp.add_argument("--batch", default=None, metavar="NAME",
                      help="make dimension 0 of every input the size parameter NAME")
    comp.set_defaults(run=cmd_compile)
    run = commands.add_parser("run", help="compile an ONNX model and run it on .npy inputs")
    run.add_argument("model", help="the .onnx file")
    run.add_argument("--input", action="append", required=True, metavar="NPY",
                     help="an input array (.npy), once per model input, in order")
    run.add_argument("--output", default=None, metavar="NPY", help="save the output here")
    run.add_argument("--batch", default=None, metavar="NAME",
                     help="make dimension 0 of every input the size parameter NAME")
    run.add_argument("--benchmark", action="store_true", help="also time the model")
    run.set_defaults(run=cmd_run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: one subcommand each, ``run`` set to its function.

    >>> build_parser().parse_args(["demo", "--size", "64"]).size
    64
    """
    parser = argparse.ArgumentParser(
        prog="polyloop", description="polyloop: a compiler for loop and tensor programs.")
    parser.add_argument("--version", action="version",
                        version=f"polyloop {package_version('polyloop')}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo_command(commands)
    _add_bench_command(commands)
    _add_tune_command(commands)
    version = commands.add_parser("version", help="print the versions of polyloop, its "
                                                  "dependencies and the C compiler")
    version.set_defaults(run=cmd_version)
    _add_graph_commands(commands)
    add_rpc_commands(commands)
    return parser


def _add_demo_command(commands) -> None:
    demo = commands.add_parser(
        "demo", help="build, check and time matmul+ReLU and softmax against NumPy",
        description="Build matmul + ReLU (n=512) and a row softmax (1024 x 1024) with hand "
                    "schedules; print each schedule, loop nest and generated C; check the "
                    "results against NumPy and time both.")
    demo.add_argument("--size", type=_positive, default=None, metavar="N",
                      help="use N x N for both workloads (default: 512 for matmul, 1024 for "
                           "softmax)")
    demo.add_argument("--repeat", type=_positive, default=10, metavar="R",
                      help="timings per measurement; the median is shown (default: 10)")
    demo.set_defaults(run=cmd_demo)


def _add_bench_command(commands) -> None:
    perf = commands.add_parser(
        "bench", help="time polyloop's operator schedules against PyTorch, NumPy and TVM",
        description="Build each workload's operator schedule, check it against NumPy, and time "
                    "it next to PyTorch (CPU), NumPy and Apache TVM when installed (pip install "
                    "'polyloop[bench]'), with the machine's FMA peak and triad bandwidth "
                    "measured in the same run.")
    perf.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                      help="workload keys or groups (e.g. matmul-1024, matmul, conv2d, softmax);"
                           " default: all")
    perf.add_argument("--json", action="store_true", help="print one JSON list of records")
    perf.add_argument("--repeat", type=_positive, default=10, metavar="N",
                      help="timings per median (default: 10)")
    perf.add_argument("--rounds", type=_positive, default=3, metavar="R",
                      help="interleaved rounds; the best median is kept (default: 3)")
    perf.add_argument("--stat", choices=("median", "min"), default="median",
                      help="the figure kept of the timings (default: median; min shows what a "
                           "kernel does when the machine is not busy with other processes)")
    perf.add_argument("--quick", action="store_true",
                      help="tiny workloads and short limit measurements (a smoke test)")
    perf.add_argument("--peers", default=None, metavar="LIST",
                      help="comma-separated references to run among torch,numpy,tvm "
                           "(default: all that are installed)")
    perf.add_argument("--threads", type=_positive, default=2, metavar="T",
                      help="threads for PyTorch, TVM and the limit programs (default: 2)")
    perf.add_argument("--no-limits", action="store_true",
                      help="skip measuring the FMA peak and triad bandwidth")
    perf.add_argument("--profile", action="store_true",
                      help="instead of the table: for each workload a roofline line, the "
                           "per-nest profile of polyloop's module and perf's top symbols of "
                           "polyloop and the reference")
    perf.add_argument("--no-perf", action="store_true",
                      help="with --profile: do not sample with perf record")
    perf.add_argument("--plot", default=None, metavar="PNG",
                      help="also draw a bar chart (speed relative to PyTorch) into this file")
    perf.set_defaults(run=cmd_bench)


def _add_tune_command(commands) -> None:
    tuning = commands.add_parser(
        "tune", help="tune a program of a Python file (polyloop tune FILE.py:FUNCTION) or every "
                     "kernel of an ONNX model (polyloop tune model.onnx)",
        description="Search schedules of FUNCTION (a @pl.script program, a kernel, output "
                    "tensors, or a function of no arguments returning one) and print the "
                    "fastest; or of every kernel of a model (MODEL.onnx), the trials spread "
                    "where its time is (pl.graph.tune), for pl.graph.build(g, "
                    "database=WORK_DIR). Records go to --work-dir (resumed when run again).")
    tuning.add_argument("target_spec", metavar="FILE.py:FUNCTION|MODEL.onnx")
    tuning.add_argument("--trials", type=int, default=200)
    tuning.add_argument("--work-dir", default="polyloop-tune")
    tuning.add_argument("--strategy", choices=("evolutionary", "random"), default="evolutionary")
    tuning.add_argument("--target", choices=("c", "opencl", "cuda"), default="c",
                        help="the target to tune for (opencl, cuda: run on this machine's device)")
    tuning.add_argument("--seed", type=int, default=0)
    tuning.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                        help="a size parameter's value for measuring (repeatable)")
    tuning.add_argument("-v", "--verbose", action="store_true", help="log each candidate")
    tuning.set_defaults(run=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    """``polyloop tune FILE.py:FUNCTION``: tune with a progress bar, print the best trace."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    sizes = {}
    for item in args.size:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise PolyloopError(f"--size {item!r}: write NAME=VALUE with an integer value")
        sizes[name.strip()] = int(value)
    if args.target_spec.endswith(".onnx"):
        return _tune_model(args, sizes)
    obj = load_program(args.target_spec)
    res = tune_with_progress(obj, trials=args.trials, work_dir=args.work_dir, out=sys.stderr,
                             strategy=args.strategy, seed=args.seed, sizes=sizes or None,
                             target=args.target)
    print(f"best: {format_time(res.seconds)} ({res.database})")
    # the default schedule (the loops as written) can win: its trace has no step to print
    print(res.trace if len(res.trace) else "# the default schedule: no primitive applied")
    return 0


def _tune_model(args: argparse.Namespace, sizes: dict[str, int]) -> int:
    """``polyloop tune MODEL.onnx``: ``pl.graph.tune`` with a progress bar, then the trials and
    best time of each kernel."""
    try:
        from tqdm import tqdm
    except ImportError:
        raise PolyloopError("the progress bar needs tqdm: pip install polyloop[tune]") from None
    g = graph.from_onnx(args.target_spec)
    bar = tqdm(total=args.trials, unit="trial", file=sys.stderr, dynamic_ncols=True)

    def show(done: int, total: int, task: str) -> None:
        bar.n = done
        bar.set_postfix_str(task, refresh=False)
        bar.refresh()
    try:
        res = graph.tune(g, trials=args.trials, work_dir=args.work_dir, sizes=sizes or None,
                         seed=args.seed, progress=show)
    finally:
        bar.close()
    for task, trials, seconds in zip(res.tasks, res.trials, res.seconds):
        print(f"{task.name}: {trials} trials, x{task.calls}, best {format_time(seconds)}")
    print(f"kernels: {format_time(res.estimated_seconds)} per run ({res.work_dir}); build with "
          f"pl.graph.build(g, database={res.work_dir!r})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``polyloop`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except PolyloopError as e:
        print(f"polyloop {args.command}: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `polyloop demo | head`: the reader left; stop quietly, and keep Python's exit-time
        # flush of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
