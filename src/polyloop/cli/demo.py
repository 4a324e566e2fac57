# SPDX-License-Identifier: Apache-2.0
"""``polyloop demo``'s workloads and report: each algorithm as a user writes it, its schedule
from ``polyloop.ops``, the generated code, a check against NumPy and a timing table; and the
versions line ``polyloop version`` prints."""
from __future__ import annotations

import inspect
import os
import platform
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata

import numpy as np

from .. import config, ops
from ..bench.peers import time_call
from ..driver import build
from ..errors import PolyloopError
from ..frontend import te
from ..frontend.te import Tensor
from ..runtime import Module
from ..runtime.compiler import compiler_version
from ..schedule import Schedule
from ..util.units import format_time

RULE = "=" * 96


class DemoFailure(Exception):
    """A demo result differs from NumPy's: the compiler is wrong, and the demo says so."""


# --- the workloads: the algorithm as a user writes it, the schedule from polyloop.ops --------

def matmul_relu(n: int) -> Tensor:
    """``D = max(A @ B, 0)`` for n x n float32 matrices (n: an int, or pl.var for any size)."""
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    return ops.matmul_relu(A, B)


def softmax(n: int) -> Tensor:
    """Softmax over the last axis of an n x n float32 matrix, in the numerically stable form
    (n: an int, or pl.var for any size)."""
    X = te.placeholder((n, n), "float32", name="X")
    return ops.softmax(X)


def numpy_matmul_relu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a @ b, 0)


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# --- what the demo runs -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Case:
    """One demo workload with everything needed to build, check and time it."""

    title: str
    formula: str                       # with the inputs' shape, "n" standing for the size
    default_size: int
    algorithm: Callable[[int], Tensor]
    schedule: Callable[[Tensor], Schedule]
    reference: Callable[..., np.ndarray]
    numpy_text: str
    inputs: Callable[[int, np.random.Generator], list[np.ndarray]]
    work: Callable[[int], float]       # FLOPs or bytes per call
    unit: str                          # "GFLOP/s" or "GB/s"
    work_note: str
    rtol: float
    atol: float


CASES = (
    Case(title="matmul + ReLU", formula="D = max(A @ B, 0);  A, B: n x n float32",
         default_size=512, algorithm=matmul_relu, schedule=ops.schedule_matmul_relu,
         reference=numpy_matmul_relu, numpy_text="np.maximum(a @ b, 0)",
         inputs=lambda n, rng: [rng.random((n, n), dtype=np.float32) for _ in range(2)],
         work=lambda n: 2.0 * n ** 3, unit="GFLOP/s",
         work_note="GFLOP/s counts 2 n^3 (the ReLU's n^2 is not counted)",
         rtol=1e-4, atol=1e-5),
    Case(title="softmax over rows", formula="Y[i, :] = softmax(X[i, :]);  X: n x n float32",
         default_size=1024, algorithm=softmax, schedule=ops.schedule_softmax,
         reference=numpy_softmax,
         numpy_text="e = np.exp(x - x.max(1, keepdims=True)); e / e.sum(1, keepdims=True)",
         inputs=lambda n, rng: [rng.standard_normal((n, n), dtype=np.float32)],
         work=lambda n: 2.0 * 4 * n * n, unit="GB/s",
         work_note="GB/s counts one read of X and one write of Y (4 bytes each)",
         rtol=1e-5, atol=1e-6),
)


@dataclass(frozen=True, slots=True)
class Timing:
    label: str
    seconds: float


def time_numpy(fn: Callable[..., object], args: Sequence[np.ndarray], *, repeat: int,
               warmup: int = 3, min_time: float = 1e-3) -> float:
    """Median seconds of one call, measured the way ``Module.benchmark`` measures a kernel."""
    return time_call(lambda: fn(*args), repeat=repeat, warmup=warmup, min_time=min_time)


def check(label: str, got: np.ndarray, want: np.ndarray, case: Case) -> tuple[bool, str]:
    """Whether ``got`` matches NumPy's ``want`` within the case's tolerance; a line saying so."""
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    ok = bool(np.allclose(got, want, rtol=case.rtol, atol=case.atol))
    return ok, (f"{label:<28} max abs error {err:.2e}   (tolerance {case.atol:g} + {case.rtol:g}"
                f" * |numpy|)   {'OK' if ok else 'WRONG'}")


def source_of(fn: Callable[..., object]) -> str:
    try:
        return textwrap.dedent(inspect.getsource(fn)).rstrip()
    except (OSError, TypeError):
        return f"{fn.__qualname__} (source not available)"




def format_speed(r: float) -> str:
    return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"


def table(timings: Sequence[Timing], work: float, unit: str) -> list[str]:
    """Aligned rows: implementation, time, throughput and speed relative to NumPy (first row)."""
    base = timings[0].seconds
    width = max(len(t.label) for t in timings)
    lines = [f"  {'implementation':<{width}}  {'time':>12}  {unit:>9}  {'vs NumPy':>9}"]
    for t in timings:
        lines.append(f"  {t.label:<{width}}  {format_time(t.seconds):>12}  "
                     f"{work / t.seconds / 1e9:>9.3g}  {format_speed(base / t.seconds):>9}")
    return lines


def section(out: list[str], title: str, body: str) -> None:
    out.extend(["", f"## {title}", body])


def show(case: Case, sch: Schedule, mod: Module, build_s: float) -> str:
    """The algorithm, the schedule, the scheduled program and the generated C."""
    out: list[str] = []
    section(out, "algorithm (tensor expressions; te.f here is pl.f for a user)",
            source_of(case.algorithm))
    section(out, f"schedule (polyloop.ops.{case.schedule.__name__}, as its trace: each "
                 "primitive checked against exact dependences)", str(sch.trace))
    section(out, "scheduled program  -- print(sch)", str(sch))
    lib = mod.library
    how = "taken from the cache" if mod.cache_hit else f"compiled with {' '.join(lib.flags)}"
    section(out, "generated C  -- mod.source",
            f"(built in {build_s:.2f} s, {how}; source at {lib.source_path})\n\n"
            + mod.source.rstrip())
    return "\n".join(out)


def run_case(number: int, case: Case, n: int, *, repeat: int, emit: Callable[[str], None]) -> None:
    """Build, print, check and time one workload; ``emit`` prints a block of text. Raises
    DemoFailure, after printing the check, when a result differs from NumPy's."""
    emit("\n".join([RULE, f"[{number}/{len(CASES)}] {case.title}:  {case.formula}  (n = {n})",
                    RULE]))
    output = case.algorithm(n)
    sch = case.schedule(output)
    start = time.perf_counter()
    hand = build(sch)
    emit(show(case, sch, hand, time.perf_counter() - start))

    inputs = case.inputs(n, np.random.default_rng(number))
    default = build(output)
    want = case.reference(*inputs)
    results = {"hand": hand(*inputs), "default": default(*inputs)}
    checks = {f"polyloop, {name} schedule": check(f"polyloop, {name} schedule", got, want, case)
              for name, got in results.items()}
    emit("\n".join(["", "## check against NumPy (same inputs, float32)"]
                   + [line for _, line in checks.values()]))
    wrong = [label for label, (ok, _) in checks.items() if not ok]
    if wrong:
        raise DemoFailure(f"{case.title}: {' and '.join(wrong)} differ(s) from NumPy")

    timings = [Timing(f"NumPy {np.__version__}", time_numpy(case.reference, inputs, repeat=repeat)),
               Timing("polyloop, default schedule", default.benchmark(
                   *inputs, results["default"], repeat=min(repeat, 3), warmup=1)),
               Timing("polyloop, hand schedule", hand.benchmark(*inputs, results["hand"],
                                                                repeat=repeat))]
    emit("\n".join(["", f"## time (median of {repeat} after warm-up)"]
                   + table(timings, case.work(n), case.unit)
                   + [f"  NumPy runs {case.numpy_text}", f"  {case.work_note}"]) + "\n")


# --- commands ----------------------------------------------------------------------------------

def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def versions() -> str:
    """polyloop's version and those of what it builds with, on one line."""
    try:
        gcc = compiler_version(config.CONFIG.cc)
    except PolyloopError:
        gcc = f"C compiler {config.CONFIG.cc!r} not found"
    return (f"polyloop {package_version('polyloop')} | python {platform.python_version()} | "
            f"numpy {np.__version__} | islpy {package_version('islpy')} | {gcc}")
