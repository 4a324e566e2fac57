# SPDX-License-Identifier: Apache-2.0
"""add_prefetch of reads guarded by where() (padding): the copy covers the elements the reads
that run use, clipped to the array, so it never reads outside it (proven with isl on the
scheduled program; run on C, on OpenCL and compiled for CUDA against NumPy, outputs poisoned;
under AddressSanitizer in tests/fuzz/test_sanitizers.py)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.poly.bounds import find_out_of_bounds
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available
from polyloop.schedule.kernel import schedule_of

OPENCL, OPENCL_WHY = platform_available()
SIZES = [(1, 1), (7, 9), (8, 16), (17, 30)]


def guarded_shift(gpu: bool):
    """out[i, j] = a[i - 1, j] (0 on row 0) + 2 a[i, j + 1] (0 on the last column), in 8 x 8
    tiles (work-groups when ``gpu``), ``a`` prefetched per tile."""
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }",
                         "out[i, j] = where(i >= 1, a[i - 1, j], 0) "
                         "+ where(j + 1 < m, a[i, j + 1], 0) * 2",
                         args=[pl.ArrayArg("a", "float32", shape=("n", "m")),
                               pl.ArrayArg("out", "float32", shape=("n", "m"))], name="shift")
    tags = ({"outer_tag": "g.1", "inner_tag": "l.1"}, {"outer_tag": "g.0", "inner_tag": "l.0"})
    knl = pl.split_iname(knl, "i", 8, **(tags[0] if gpu else {}))
    knl = pl.split_iname(knl, "j", 8, **(tags[1] if gpu else {}))
    return pl.add_prefetch(knl, "a", ["i_inner", "j_inner"],
                           default_tag="l.auto" if gpu else None)


def reference(a: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    out[1:] += a[:-1]
    out[:, :-1] += 2 * a[:, 1:]
    return out


def check(mod, rng) -> None:
    for n, m in SIZES:
        a = rng.standard_normal((n, m), dtype="float32")
        out = np.full((n, m), np.nan, "float32")
        mod(a, out)
        np.testing.assert_allclose(out, reference(a), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("gpu", [False, True], ids=["tiles", "work-groups"])
def test_the_copy_reads_only_inside_the_array(gpu):
    program = schedule_of(guarded_shift(gpu)).program
    assert any(s.name == "a_fetch" for s in program.statements)
    assert find_out_of_bounds(program) is None      # every instance, every size, by isl


def test_prefetched_guarded_reads_on_c(rng):
    check(pl.build(schedule_of(guarded_shift(False)), target="c"), rng)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
@pytest.mark.parametrize("gpu", [False, True], ids=["tiles", "work-groups"])
def test_prefetched_guarded_reads_on_opencl(rng, gpu):
    mod = pl.build(schedule_of(guarded_shift(gpu)), target="opencl")
    if gpu:
        assert "__local float a_fetch[" in mod.source and "barrier(" in mod.source
    check(mod, rng)


@pytest.mark.skipif(not nvcc_available()[0], reason="CUDA compile check skipped: no nvcc")
def test_prefetched_guarded_reads_compile_for_cuda():
    mod = pl.build(schedule_of(guarded_shift(True)), target="cuda")
    assert "float a_fetch[9][9];" in mod.source and ".entry shift" in mod.ptx
