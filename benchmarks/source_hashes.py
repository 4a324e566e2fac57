# SPDX-License-Identifier: Apache-2.0
"""Hashes of the generated source of a corpus of schedules, to check that a refactoring keeps
the generated code byte-identical.

    PYTHONPATH=<checkout A>/src python benchmarks/source_hashes.py > a.json
    PYTHONPATH=<checkout B>/src python benchmarks/source_hashes.py > b.json
    python benchmarks/source_hashes.py --compare a.json b.json

The corpus: the operator library's CPU schedules, PolyBench kernels with the default and the
automatic schedule, the fuzzers' programs under seeded random schedule steps (on C and on
OpenCL), seed 000's kernels and the GPU operator schedules on OpenCL and CUDA. Only source text
is made (lowering and code generation), nothing is compiled, so no compiler or device is
needed. A schedule the checkout refuses is recorded as its error's type.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Callable, Iterator

TESTS = Path(__file__).resolve().parent.parent / "tests"


def c_source(sch) -> str:
    from polyloop.driver import c_kernel
    return c_kernel(sch, check_bounds=False)[1]


def opencl_source(sch) -> str:
    from polyloop.codegen.opencl import generate_opencl
    from polyloop.lower.launches import lower_device
    from polyloop.schedule.gpu_default import map_unbound_nests
    sch = map_unbound_nests(sch)
    return generate_opencl(lower_device(sch.program, sch.state.root))


def cuda_source(sch) -> str:
    from polyloop.codegen.cuda import generate_cuda
    from polyloop.lower.launches import lower_device
    return generate_cuda(lower_device(sch.program, sch.state.root))


def ops_cases() -> Iterator[tuple[str, Callable[[], str]]]:
    import polyloop as pl
    from polyloop import ops
    n, m, k = pl.var("n"), pl.var("m"), pl.var("k")
    for shape in (((n, k), (k, m)), ((37, 29), (29, 45))):
        def mm(shape=shape, fn=ops.matmul, sched=ops.schedule_matmul):
            a = pl.placeholder(shape[0], "float32", name="A")
            b = pl.placeholder(shape[1], "float32", name="B")
            return c_source(sched(fn(a, b)))
        yield f"ops.matmul{shape}", mm
        yield f"ops.matmul_relu{shape}", lambda shape=shape: mm(
            shape, ops.matmul_relu, ops.schedule_matmul_relu)

    def conv(depthwise: bool) -> str:
        x = pl.placeholder((1, 4, 13, 11), "float32", name="x")
        w = pl.placeholder((4, 1, 3, 3) if depthwise else (6, 4, 3, 3), "float32", name="w")
        if depthwise:
            return c_source(ops.schedule_depthwise_conv2d_nchw(ops.depthwise_conv2d_nchw(x, w)))
        return c_source(ops.schedule_conv2d_nchw(ops.conv2d_nchw(x, w)))
    yield "ops.conv2d", lambda: conv(False)
    yield "ops.depthwise_conv2d", lambda: conv(True)

    def softmax() -> str:
        x = pl.placeholder((n, m), "float32", name="x")
        return c_source(ops.schedule_softmax(ops.softmax(x)))
    yield "ops.softmax", softmax


def polybench_cases() -> Iterator[tuple[str, Callable[[], str]]]:
    import polyloop as pl
    from polybench_scripts import KERNELS
    for program in KERNELS:
        yield f"polybench.{program.name}.default", lambda p=program: c_source(pl.Schedule(p))
        yield f"polybench.{program.name}.auto", lambda p=program: c_source(pl.auto_schedule(p))


def fuzz_cases(count: int) -> Iterator[tuple[str, Callable[[], str]]]:
    import polyloop as pl
    from fuzz.corpus import GPU_PRIMITIVES, PRIMITIVES, PROGRAMS, plan_step

    def scheduled(name: str, seed: int, primitives) -> "pl.Schedule":
        r = random.Random(seed)
        sch = PROGRAMS[name].schedule()
        for _ in range(r.randint(1, 6)):
            call = plan_step(sch, r.choice(primitives), r.randrange(2**20))
            if call is not None:
                try:
                    call()
                except pl.ScheduleError:
                    pass
        return sch
    for name in sorted(PROGRAMS):
        for seed in range(count):
            yield f"fuzz.{name}.{seed}.c", lambda n=name, s=seed: c_source(
                scheduled(n, s, PRIMITIVES))
        for seed in range(count // 4):
            yield f"fuzz.{name}.{seed}.opencl", lambda n=name, s=seed: opencl_source(
                scheduled(n, s, GPU_PRIMITIVES))


def gpu_cases() -> Iterator[tuple[str, Callable[[], str]]]:
    from polyloop import ops
    from polyloop.schedule.kernel import schedule_of
    from seed_kernels import tiled_matmul
    for prefetch in (False, True):
        yield f"seed.tiled_matmul.prefetch={prefetch}.opencl", lambda p=prefetch: opencl_source(
            schedule_of(tiled_matmul(p)))
    for step in ("naive", "float4", "thread_tile", "shared"):
        make = getattr(ops, f"matmul_gpu_{step}")
        for sizes in ((), (64, 96, 32), (50, 70, 30)):
            yield f"ops.matmul_gpu_{step}{sizes}.opencl", lambda f=make, s=sizes: (
                opencl_source(f(*s)))
            yield f"ops.matmul_gpu_{step}{sizes}.cuda", lambda f=make, s=sizes: (
                cuda_source(f(*s)))
    yield "ops.depthwise_conv2d_gpu.opencl", lambda: opencl_source(
        ops.depthwise_conv2d_gpu(1, 4, 13, 11))


def corpus(fuzz_count: int) -> Iterator[tuple[str, Callable[[], str]]]:
    yield from ops_cases()
    yield from polybench_cases()
    yield from gpu_cases()
    yield from fuzz_cases(fuzz_count)


def hashes(fuzz_count: int) -> dict[str, str]:
    out = {}
    for key, make in corpus(fuzz_count):
        try:
            out[key] = hashlib.sha256(make().encode()).hexdigest()[:16]
        except Exception as e:   # a refusal is part of the behaviour being compared
            out[key] = f"error: {type(e).__name__}"
    return out


def compare(a: dict[str, str], b: dict[str, str]) -> int:
    differ = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    only = sorted(a.keys() ^ b.keys())
    print(f"{len(a.keys() & b.keys())} sources compared: {len(differ)} differ, "
          f"{len(only)} in one file only")
    for k in differ + only:
        print("  ", k)
    return 1 if differ or only else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzz", type=int, default=24, help="random schedules per fuzz program")
    ap.add_argument("--compare", nargs=2, metavar="JSON")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        sys.exit(compare(a, b))
    sys.path.insert(0, str(TESTS))
    print(json.dumps(hashes(args.fuzz), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
