# SPDX-License-Identifier: Apache-2.0
"""The machine's limits, measured by two tiny C programs compiled with the configured compiler.

- Peak FP32 FMA throughput: each OpenMP thread runs 16 independent chains of vector FMAs (enough
  to cover the FMA latency on two FMA ports), with intrinsics for AVX-512 / AVX2 and GCC vector
  extensions elsewhere; the best of a few timed runs counts ``2 * lanes`` flops per FMA.
- Memory bandwidth: an OpenMP triad ``a[i] = b[i] + s * c[i]`` over arrays far beyond the caches
  (3 x 96 MiB by default); bytes counted as 3 x 4 per element (no write-allocate traffic counted,
  as STREAM does); the best of several passes.

>>> from polyloop.bench.limits import measure_limits
>>> limits = measure_limits(threads=1, quick=True)  # doctest: +SKIP
>>> limits.peak_gflops > 0 and limits.triad_gbs > 0  # doctest: +SKIP
True
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import BuildError
from ..util.isa import host_isa

_FMA_KERNEL = {
    "avx512": ("__m512", "_mm512_set1_ps", "_mm512_fmadd_ps", "_mm512_storeu_ps", 16),
    "avx2": ("__m256", "_mm256_set1_ps", "_mm256_fmadd_ps", "_mm256_storeu_ps", 8),
}

_PEAK_SOURCE = r"""
#include <omp.h>
#include <stdio.h>
#include <immintrin.h>
#define CHAINS 16
%(generic)s
int main(int argc, char **argv) {
    long iters = atol(argv[1]);
    double best = 1e30;
    float sink = 0.0f;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = omp_get_wtime();
        #pragma omp parallel reduction(+:sink)
        {
            VEC acc[CHAINS];
            VEC x = SET1(1.0000001f + omp_get_thread_num()), y = SET1(0.9999999f);
            for (int c = 0; c < CHAINS; c++) acc[c] = SET1((float)c);
            for (long i = 0; i < iters; i++) {
                #pragma GCC unroll 16
                for (int c = 0; c < CHAINS; c++) acc[c] = FMA(acc[c], x, y);
            }
            float out[LANES];
            VEC total = acc[0];
            for (int c = 1; c < CHAINS; c++) total = total + acc[c];
            STORE(out, total);
            for (int l = 0; l < LANES; l++) sink += out[l];
        }
        double t = omp_get_wtime() - t0;
        if (t < best) best = t;
    }
    printf("%%d %%.9f %%g\n", omp_get_max_threads(), best, (double)sink);
    return 0;
}
"""

_GENERIC_VECTORS = r"""
#include <stdlib.h>
typedef float VEC __attribute__((vector_size(16)));
#define LANES 4
static inline VEC SET1(float v) { VEC r = {v, v, v, v}; return r; }
#define FMA(a, b, c) ((a) * (b) + (c))
static inline void STORE(float *p, VEC v) { for (int l = 0; l < LANES; l++) p[l] = v[l]; }
"""

_TRIAD_SOURCE = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int passes = atoi(argv[2]);
    float *a = aligned_alloc(64, n * sizeof(float));
    float *b = aligned_alloc(64, n * sizeof(float));
    float *c = aligned_alloc(64, n * sizeof(float));
    if (!a || !b || !c) return 1;
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) { a[i] = 0.0f; b[i] = 1.0f; c[i] = 2.0f; }
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        double t0 = omp_get_wtime();
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
        double t = omp_get_wtime() - t0;
        if (t < best) best = t;
    }
    printf("%d %.9f %g\n", omp_get_max_threads(), best, (double)a[n / 2]);
    free(a); free(b); free(c);
    return 0;
}
"""


@dataclass(frozen=True, slots=True)
class Limits:
    """Measured peak FP32 FMA throughput (GFLOP/s) and triad bandwidth (GB/s) on ``threads``."""

    threads: int
    isa: str
    peak_gflops: float
    triad_gbs: float

    def best_of(self, other: Limits) -> Limits:
        """The higher peak and the higher bandwidth of two measurements."""
        return Limits(self.threads, self.isa, max(self.peak_gflops, other.peak_gflops),
                      max(self.triad_gbs, other.triad_gbs))

    def describe(self) -> str:
        return (f"peak FP32 FMA {self.peak_gflops:.0f} GFLOP/s ({self.isa}, {self.threads} "
                f"threads, 16 chains); triad {self.triad_gbs:.1f} GB/s")


def peak_source() -> tuple[str, int]:
    """The FMA program's C source for the host ISA and its vector width in float32 lanes."""
    isa = host_isa(config.CONFIG.cc)
    if isa.name in _FMA_KERNEL and isa.fma:
        vec, set1, fma, store, lanes = _FMA_KERNEL[isa.name]
        generic = (f"#include <stdlib.h>\ntypedef {vec} VEC;\n#define LANES {lanes}\n"
                   f"#define SET1 {set1}\n#define FMA {fma}\n#define STORE {store}\n")
        return _PEAK_SOURCE % {"generic": generic}, lanes
    return _PEAK_SOURCE % {"generic": _GENERIC_VECTORS}, 4


def _compile_and_run(source: str, name: str, args: list[str], threads: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="polyloop-limits-") as tmp:
        c_path, exe = Path(tmp) / f"{name}.c", Path(tmp) / name
        c_path.write_text(source)
        command = [config.CONFIG.cc, "-O2", "-march=native", "-fopenmp", str(c_path), "-o",
                   str(exe)]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=config.CONFIG.compile_timeout)
        except subprocess.TimeoutExpired:
            raise BuildError(f"compiling the {name} program did not finish within "
                             f"{config.CONFIG.compile_timeout:g} s ({' '.join(command)}); raise "
                             "POLYLOOP_COMPILE_TIMEOUT or check POLYLOOP_CC") from None
        if done.returncode != 0:
            raise BuildError(f"could not compile the {name} program with {' '.join(command)}:\n"
                             f"{done.stderr.strip()}")
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="true")
        try:
            run = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env,
                                 timeout=300)
        except subprocess.TimeoutExpired:
            raise BuildError(f"the {name} program did not finish within 300 s") from None
        if run.returncode != 0:
            raise BuildError(f"the {name} program failed (exit status {run.returncode}): "
                             f"{run.stderr.strip()}")
        return run.stdout.split()


def measure_peak(threads: int, *, quick: bool = False) -> tuple[str, float]:
    """(ISA name, GFLOP/s) of 16 independent FMA chains per thread on ``threads`` threads."""
    source, lanes = peak_source()
    iters = 2_000_000 if quick else 20_000_000
    _, seconds, _ = _compile_and_run(source, "peak_fma", [str(iters)], threads)
    flops = 2.0 * lanes * 16 * iters * threads
    isa = host_isa(config.CONFIG.cc)
    name = isa.name if isa.name in _FMA_KERNEL and isa.fma else "portable vectors"
    return name, flops / float(seconds) / 1e9


def measure_triad(threads: int, *, quick: bool = False) -> float:
    """GB/s of ``a[i] = b[i] + s * c[i]`` over three float32 arrays far beyond the caches."""
    n = (4 << 20) if quick else (24 << 20)  # 3 x 16 MiB quick, 3 x 96 MiB otherwise
    _, seconds, _ = _compile_and_run(_TRIAD_SOURCE, "triad", [str(n), "3" if quick else "10"],
                                     threads)
    return 3 * 4 * n / float(seconds) / 1e9


def measure_limits(threads: int, *, quick: bool = False) -> Limits:
    """Both limits on ``threads`` OpenMP threads (``quick``: shorter runs, for smoke tests)."""
    isa, peak = measure_peak(threads, quick=quick)
    return Limits(threads, isa, peak, measure_triad(threads, quick=quick))
