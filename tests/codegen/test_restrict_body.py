# SPDX-License-Identifier: Apache-2.0
"""The C kernel's loops live in a body function that takes the arrays as restrict parameters,
so gcc keeps a value read from one array in a register across stores to another."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.util.isa import host_isa


def gemm_permuted(n, bn=32, kf=4) -> pl.Schedule:
    """TVM's GEMM tutorial after loop permutation: a row of C tile against a k panel of B."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    i, j, kk = sch.get_loops("C")
    mo, mi = sch.split(i, [None, bn])
    no, ni = sch.split(j, [None, bn])
    ko, ki = sch.split(kk, [None, kf])
    sch.reorder(mo, no, ko, mi, ki, ni)
    sch.vectorize(ni)
    sch.decompose_reduction("C", ko)
    return sch


def test_body_takes_every_array_as_a_restrict_parameter():
    n = pl.var("n")
    src = pl.build(gemm_permuted(n)).source
    assert re.search(r"static __attribute__\(\(noinline\)\) int32_t pl_C_kernel_body\("
                     r"const int64_t n, const float \(\*restrict A\)\[n\], "
                     r"const float \(\*restrict B\)\[n\], float \(\*restrict C\)\[n\]\)", src)
    assert "return pl_C_kernel_body(n, A, B, C);" in src


@pytest.mark.parametrize("size, symbolic", [(70, False), (45, True)])
def test_results_equal_numpy_at_sizes_off_the_tiles(size, symbolic):
    rng = np.random.default_rng(size)
    a, b = (rng.standard_normal((size, size)).astype("float32") for _ in range(2))
    mod = pl.build(gemm_permuted(pl.var("n") if symbolic else size))
    out = np.full((size, size), np.nan, np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def _hot_loop(disassembly: str) -> list[str]:
    """The shortest backward-branching loop that holds an FMA: the innermost compute loop."""
    rows = [r for r in disassembly.splitlines() if re.match(r"\s+[0-9a-f]+:\t", r)]
    at = [int(r.split(":")[0], 16) for r in rows]
    best: list[str] = []
    for end, row in enumerate(rows):
        jump = re.search(r"\tj\w+\s+([0-9a-f]+) <", row)
        if jump is None or int(jump.group(1), 16) >= at[end]:
            continue
        body = [r for r, a in zip(rows, at) if int(jump.group(1), 16) <= a <= at[end]]
        if any("vfmadd" in r for r in body) and (not best or len(body) < len(best)):
            best = body
    return best


def test_a_panel_of_b_stays_in_registers_across_the_rows_of_c():
    if shutil.which("objdump") is None or host_isa(config.CONFIG.cc).name != "avx512":
        pytest.skip("needs objdump and an AVX-512 host (the register count decides the code)")
    mod = pl.build(gemm_permuted(1024))
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(mod.library.path)],
                         capture_output=True, text=True, check=True).stdout
    loop = _hot_loop(dis)
    fmas = [r for r in loop if "vfmadd" in r]
    from_memory = [r for r in fmas if "(" in r]
    # per row of C: 2 vectors of C read (folded into an FMA), 8 vectors of B from registers;
    # with B re-read from memory every FMA reads memory
    assert fmas and len(from_memory) * 4 <= len(fmas), "\n".join(loop)
