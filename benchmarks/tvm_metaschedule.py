# SPDX-License-Identifier: Apache-2.0
"""Tune matmul (float32, n^3) with Apache TVM's MetaSchedule and time its best kernel; the
reference row of ``bench_tune.py``, run by it as a separate process.

    python benchmarks/tvm_metaschedule.py --n 256 --trials 16

Run it in the environment where TVM is installed. It prints one JSON line last: ``{"tuning_s":
..., "trials": ..., "seconds": ..., "target": ..., "library": ...}`` (the tuned kernel exported
as a shared library, for the caller to time next to its own rows) or ``{"error": ...}``. A
process of its own so that a MetaSchedule crash cannot take the benchmark down, and so that
PyTorch stays out: TVM's FFI package imports PyTorch whenever it can, which makes each of
MetaSchedule's builder and runner worker processes take seconds (on a loaded machine, longer
than their time-out) to start. This process and its workers see a ``torch`` package that cannot
be imported (first on their path, in the work directory).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

import numpy as np


def _cpu_name() -> str:
    """The LLVM CPU name for this host: TVM 0.27 does not accept ``mcpu=native`` here."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return ""
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    amd = "AuthenticAMD" in info
    if "avx512f" in flags:
        return "znver4" if amd else "icelake-server"
    if "avx2" in flags:
        return "znver3" if amd else "haswell"
    return ""


def _target(tvm, cores: int):
    spec = {"kind": "llvm", "num-cores": cores}
    cpu = _cpu_name()
    if cpu:
        spec["mcpu"] = cpu
    return tvm.target.Target(spec)


def _matmul(te, n: int):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def tune(n: int, trials: int, cores: int, work_dir: str, timeout: float) -> dict:
    """MetaSchedule's tuning of matmul ``n``^3 (``trials`` candidates), then its best kernel
    checked against NumPy and timed; ``timeout``: seconds one build or one run may take (a
    loaded machine needs far more than MetaSchedule's default 30)."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    target = _target(tvm, cores)
    mod = tvm.IRModule({"main": _matmul(te, n)})
    start = time.perf_counter()
    database = ms.tir_integration.tune_tir(
        mod, target, work_dir, max_trials_global=trials,
        num_trials_per_iter=min(64, trials),
        builder=ms.builder.LocalBuilder(timeout_sec=timeout),
        runner=ms.runner.LocalRunner(timeout_sec=timeout),
        num_tuning_cores=cores, seed=0)
    tuning = time.perf_counter() - start
    sch = ms.tir_integration.compile_tir(database, mod, target)
    if sch is None:
        return {"error": "MetaSchedule found no valid schedule", "tuning_s": tuning}
    lib = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    ta, tb = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
    tc = tvm.runtime.tensor(np.full((n, n), np.nan, "float32"), dev)
    lib["main"](ta, tb, tc)
    err = float(np.max(np.abs(tc.numpy() - a @ b)))
    if not err <= 1e-2 * n ** 0.5:
        return {"error": f"MetaSchedule's kernel is wrong (max error {err})",
                "tuning_s": tuning}
    module = lib.jit() if hasattr(lib, "jit") else lib     # tvm.compile's Executable
    timer = module.time_evaluator("main", dev, number=3, repeat=10, min_repeat_ms=50)
    seconds = float(np.median(timer(ta, tb, tc).results))
    library = os.path.join(work_dir, "matmul_tuned.so")
    try:
        lib.export_library(library)
    except Exception:  # noqa: BLE001 - the caller then uses the time measured here
        library = ""
    return {"tuning_s": tuning, "trials": trials, "seconds": seconds, "target": str(target),
            "library": library}


def _without_torch(work_dir: str) -> None:
    """Keep PyTorch out of this process and of the worker processes it starts (see the
    module docstring): a ``torch`` package whose import fails, first on the path."""
    stub = os.path.join(work_dir, "no-torch")
    os.makedirs(os.path.join(stub, "torch"), exist_ok=True)
    with open(os.path.join(stub, "torch", "__init__.py"), "w") as f:
        f.write('raise ImportError("PyTorch is kept out of the MetaSchedule benchmark")\n')
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [stub, *filter(None, [os.environ.get("PYTHONPATH")])])
    sys.path.insert(0, stub)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds one candidate's build or run may take")
    args = ap.parse_args()
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench-tvm-ms-")
    _without_torch(work_dir)
    try:
        result = tune(args.n, args.trials, args.cores, work_dir, args.timeout)
    except Exception as e:  # noqa: BLE001 - the benchmark reports it and goes on
        tail = traceback.format_exc().strip().splitlines()[-6:]
        result = {"error": f"{type(e).__name__}: {e}".strip()[:500], "trace": tail}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
