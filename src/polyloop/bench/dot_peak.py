# SPDX-License-Identifier: Apache-2.0
"""The machine's peak for the low-bit dot-product instructions, measured like the FP32 peak
(``limits``): each OpenMP thread runs 16 independent chains of AVX-512 VNNI ``vpdpbusd``
(64 uint8 x int8 multiply-adds into int32 per instruction) or AVX-512 BF16 ``vdpbf16ps``
(32 bfloat16 multiply-adds into float32); an operation is a multiply or an add, as for flops.

>>> from polyloop.bench.dot_peak import DOT_PEAKS, measure_dot_peak
>>> sorted(DOT_PEAKS)
['bf16', 'vnni']
>>> measure_dot_peak("vnni", threads=1, quick=True) > 0  # doctest: +SKIP
True
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config
from ..errors import BuildError
from ..util.isa import host_isa
from .limits import _compile_and_run


@dataclass(frozen=True, slots=True)
class DotPeak:
    """How to spell one instruction's chains: the accumulator type, its initial value, the
    instruction, how to fold an accumulator into a double, the operations per instruction."""
    macros: tuple[str, ...]
    acc: str
    init: str
    operand: str
    step: str
    fold: str
    ops: int


DOT_PEAKS = {
    "vnni": DotPeak(("__AVX512F__", "__AVX512VNNI__"), "__m512i", "_mm512_set1_epi32(c)",
                    "_mm512_set1_epi32(0x01020304 + t)", "_mm512_dpbusd_epi32(acc[c], x, y)",
                    "(double)_mm512_reduce_add_epi32(acc[c])", 2 * 64),
    "bf16": DotPeak(("__AVX512F__", "__AVX512BF16__"), "__m512", "_mm512_set1_ps((float)c)",
                    "(__m512bh)_mm512_set1_epi32(0x3f803f80 + t)",
                    "_mm512_dpbf16_ps(acc[c], x, y)", "(double)_mm512_reduce_add_ps(acc[c])",
                    2 * 32),
}

_SOURCE = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <immintrin.h>
#include <time.h>
#define CHAINS 16
static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
int main(int argc, char **argv) {
    long iters = atol(argv[1]);
    double best = 1e30, best_cpu = 1e30, sink = 0.0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = omp_get_wtime(), c0 = cpu_seconds();
        #pragma omp parallel reduction(+:sink)
        {
            const int t = omp_get_thread_num();
            %(acc)s acc[CHAINS];
            const __m512i xi = _mm512_set1_epi32(0x01010101 + t);
            const __typeof__(%(operand)s) x = (__typeof__(%(operand)s))xi, y = %(operand)s;
            for (int c = 0; c < CHAINS; c++) acc[c] = %(init)s;
            for (long i = 0; i < iters; i++) {
                #pragma GCC unroll 16
                for (int c = 0; c < CHAINS; c++) acc[c] = %(step)s;
            }
            for (int c = 0; c < CHAINS; c++) sink += %(fold)s;
        }
        double t = omp_get_wtime() - t0, c = cpu_seconds() - c0;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    printf("%%d %%.9f %%.9f %%g\n", omp_get_max_threads(), best, best_cpu, sink);
    return 0;
}
"""


def host_has(kind: str) -> bool:
    """Whether the host (``cc -march=native``) runs the ``kind`` instruction."""
    isa = host_isa(config.CONFIG.cc)
    return all(isa.has(m) for m in DOT_PEAKS[kind].macros)


def measure_dot_peak(kind: str, threads: int, *, quick: bool = False,
                     cpu_time: bool = False) -> float:
    """GOP/s of 16 independent chains of the ``kind`` instruction ("vnni" or "bf16") per
    thread on ``threads`` threads; raises ``BuildError`` where the host lacks it. With
    ``cpu_time`` the time is the process's CPU time over the threads (what the threads ran,
    not what they waited for the CPU: an estimate for a machine other processes load)."""
    p = DOT_PEAKS[kind]
    if not host_has(kind):
        raise BuildError(f"the host's compiler (-march=native) does not define "
                         f"{' and '.join(p.macros)}: no {kind} peak to measure")
    source = _SOURCE % {"acc": p.acc, "init": p.init, "operand": p.operand, "step": p.step,
                        "fold": p.fold}
    iters = 2_000_000 if quick else 20_000_000
    _, wall, cpu, _ = _compile_and_run(source, f"peak_{kind}", [str(iters)], threads)
    seconds = float(cpu) / threads if cpu_time else float(wall)
    return p.ops * 16 * iters * threads / seconds / 1e9
