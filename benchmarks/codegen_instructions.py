# SPDX-License-Identifier: Apache-2.0
"""Code generation cost as instructions executed, for comparing two versions of polyloop on a
noisy machine: ``bench_codegen.py``'s kernels (``make_kernel`` -> OpenCL source) run under
``valgrind --tool=callgrind``, whose instruction count does not change with what else the
machine is doing (times on a shared 2-core host move by 1.5-2x from one second to the next;
these counts by about 3-4 % from one measurement to the next, so a difference smaller than
that needs several measurements of each version).

    python benchmarks/codegen_instructions.py                    # every kernel, 5 runs each
    python benchmarks/codegen_instructions.py matmul --runs 3

Each kernel is measured in two processes that import polyloop and generate the kernel once
(imports, first-run work), then ``--runs`` more times or not at all, with polyloop's caches
cleared before each run; the difference divided by ``--runs`` is the cost of one run. Needs
valgrind (``apt install valgrind``); about 30 s per kernel. This counts instructions, not time:
a change that trades instructions for cache misses is not seen, so confirm with
``bench_codegen.py``.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ("double", "matmul", "matmul+prefetch")


def _inner(kernel: str, runs: int) -> None:
    sys.path.insert(0, HERE)
    import bench_codegen as b
    b.clear_polyloop_caches()
    b.polyloop_source(kernel)
    for _ in range(runs):
        b.clear_polyloop_caches()
        b.polyloop_source(kernel)


def _count(kernel: str, runs: int) -> int:
    """Instructions executed by a process that generates ``kernel`` 1 + ``runs`` times."""
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         os.path.realpath(sys.executable), os.path.abspath(__file__), "--inner", kernel,
         str(runs)], capture_output=True, text=True)
    found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise SystemExit(f"valgrind failed on {kernel}:\n{tail}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="*",
                    help=f"kernels to measure: {', '.join(KERNELS)} (default: all)")
    ap.add_argument("--runs", type=int, default=5, help="measured runs per kernel")
    ap.add_argument("--inner", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        _inner(args.inner[0], int(args.inner[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt install valgrind)")
    if args.runs < 1:
        raise SystemExit(f"--runs must be at least 1, got {args.runs}")
    unknown = [k for k in args.kernels if k not in KERNELS]
    if unknown:
        raise SystemExit(f"unknown kernel(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(KERNELS)}")
    print(f"instructions per code generation (callgrind; {args.runs} runs less none)")
    for kernel in args.kernels or KERNELS:
        per_run = (_count(kernel, args.runs) - _count(kernel, 0)) / args.runs
        print(f"{kernel:<18}{per_run / 1e6:>10.1f} M")


if __name__ == "__main__":
    main()
