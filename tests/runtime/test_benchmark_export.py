# SPDX-License-Identifier: Apache-2.0
"""Module.benchmark and Module.export_library."""
import subprocess

import numpy as np
import pytest

from polyloop import config
from polyloop.errors import ArgumentError, PolyloopError


def test_benchmark_returns_seconds_per_call(kernel):
    a, b = np.ones(1000, dtype=np.float32), np.ones(1000, dtype=np.float32)
    seconds = kernel("vadd").benchmark(a, b, repeat=3, warmup=1)
    assert isinstance(seconds, float) and 0 < seconds < 1


def test_benchmark_calls_the_kernel_warmup_plus_repeat_times_at_least(kernel):
    calls = np.zeros(1, dtype=np.int64)
    kernel("counter").benchmark(calls, repeat=3, warmup=2, min_time=0)
    assert calls[0] >= 5


def test_benchmark_runs_tiny_kernels_many_times_per_timing(kernel):
    calls = np.zeros(1, dtype=np.int64)
    kernel("counter").benchmark(calls=calls, repeat=2, warmup=0, min_time=1e-3)
    assert calls[0] > 10


def test_benchmark_checks_its_arguments(kernel):
    with pytest.raises(ArgumentError, match="dtype float32"):
        kernel("vadd").benchmark(np.ones(4), np.ones(4))
    with pytest.raises(PolyloopError, match="repeat >= 1"):
        kernel("vadd").benchmark(np.ones(4, np.float32), np.ones(4, np.float32), repeat=0)


def test_benchmark_reports_a_failing_kernel(kernel):
    with pytest.raises(PolyloopError, match="status 1"):
        kernel("status").benchmark(np.array(1, dtype=np.int32), repeat=1)


MAIN = r"""
#include <stdio.h>
#include "libvadd.h"
int main(void) {
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, c[3] = {0};
    void *args[VADD_NUM_ARGS] = {a, b, c};
    int64_t params[VADD_NUM_PARAMS] = {3};
    int32_t status = vadd(args, params);
    printf("%d %g %g %g\n", status, c[0], c[1], c[2]);
    return status;
}
"""


def test_export_library_writes_a_usable_library_and_header(kernel, tmp_path):
    library, header = kernel("vadd").export_library(tmp_path / "out" / "libvadd.so")
    assert library == tmp_path / "out" / "libvadd.so" and header == library.with_suffix(".h")
    text = header.read_text()
    assert "int32_t vadd(void **args, const int64_t *params);" in text
    assert "args[2] = C: float *, output, float32[n]" in text
    assert "params[0] = n" in text
    assert "vadd(A: float32[n], B: float32[n]) -> C: float32[n]" in text
    (tmp_path / "out" / "main.c").write_text(MAIN)
    exe = tmp_path / "out" / "main"
    subprocess.run([config.CONFIG.cc, "main.c", "-o", str(exe), "-L.", "-lvadd",
                    "-Wl,-rpath,$ORIGIN"], cwd=library.parent, check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["0", "11", "22", "33"]


def test_export_library_into_a_directory(kernel, tmp_path):
    library, header = kernel("vadd").export_library(tmp_path)
    assert library == tmp_path / "libvadd.so" and header == tmp_path / "libvadd.h"
    assert library.read_bytes() == kernel("vadd").library.path.read_bytes()
