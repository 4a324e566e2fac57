# SPDX-License-Identifier: Apache-2.0
"""``vectorize`` emits code that really is vectorized: explicit vector code (codegen/vector.py),
or, where a loop has no explicit vector form, an ``omp simd`` loop that gcc vectorizes: build,
then compile the module's source again with ``-fopt-info-vec-optimized`` and find gcc's report
for every ``omp simd`` loop (or, for a zero fill, its replacement by a memset call)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import polyloop as pl

from .programs import matmul_sch, vector_add
from .test_seeds import bmm_relu, seed_001_bmm_schedule

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")


def vectorized_lines(source: str, tmp_path: Path) -> set[int]:
    path = tmp_path / "kernel.c"
    path.write_text(source)
    done = subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-std=gnu11",
                           "-fopt-info-vec-optimized", "-fopt-info-loop-optimized", "-c",
                           str(path), "-o",
                           str(tmp_path / "kernel.o")], capture_output=True, text=True,
                          check=True)
    report = done.stdout + done.stderr
    # a zero fill may become a memset instead: better still
    pattern = (r"kernel\.c:(\d+):\d+: optimized: (loop vectorized|"
               r"Loop \d+ distributed: split to 0 loops and 1 library calls)")
    return {int(m.group(1)) for m in re.finditer(pattern, report)}


def simd_loops(source: str) -> list[int]:
    """Line numbers of the loops under ``#pragma omp simd``."""
    lines = source.splitlines()
    return [k + 2 for k, ln in enumerate(lines) if ln.strip() == "#pragma omp simd"]


def explicit_loops(source: str) -> int:
    """How many loops were written as explicit vector code."""
    return source.count("explicit vectors of")


def assert_all_vectorized(source: str, tmp_path: Path) -> None:
    done = vectorized_lines(source, tmp_path)
    loops = simd_loops(source)
    assert loops or explicit_loops(source), "no vectorized loop in the source"
    for line in loops:
        # gcc reports the loop at its header or at the first line of its body
        assert {line, line + 1} & done, (f"loop at line {line} not vectorized; gcc vectorized "
                                         f"lines {sorted(done)}\n{source}")


def test_vectorized_inner_tile_of_the_matmul(tmp_path):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    assert_all_vectorized(pl.build(sch).source, tmp_path)


def test_vectorized_vector_add(tmp_path):
    sch = pl.Schedule(vector_add())
    (i,) = sch.get_loops("C")
    i0, i1 = sch.split(i, factors=[None, 16])
    sch.vectorize(i1)
    sch.parallel(i0)
    assert_all_vectorized(pl.build(sch).source, tmp_path)


def test_vectorized_loops_of_the_seed_001_schedule(tmp_path):
    src = pl.build(seed_001_bmm_schedule(bmm_relu(2, 32))).source
    assert len(simd_loops(src)) + explicit_loops(src) == 2
    assert_all_vectorized(src, tmp_path)
