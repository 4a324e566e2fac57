# SPDX-License-Identifier: Apache-2.0
"""A 'global' temporary of a stage computed at a loop is sized to what one iteration of that
loop touches (as TVM infers the region at the compute location); whole only at the root."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.program import MemScope
from polyloop.lower.lower import lower


def write_cache_matmul(n, *, at_tile: bool, parallel: bool = True) -> pl.Schedule:
    """TVM's GEMM tutorial 'write cache' step: C accumulated in C_global, written back per
    32 x 32 tile (reverse_compute_at the tile's loop), tiles of rows in parallel."""
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    cc = sch.cache_write("C", "global")
    i, j, kk = sch.get_loops("C")
    mo, mi = sch.split(i, [None, 32])
    no, ni = sch.split(j, [None, 32])
    ko, ki = sch.split(kk, [None, 4])
    sch.reorder(mo, no, ko, mi, ki, ni)
    sch.unroll(ki)
    sch.vectorize(ni)
    if at_tile:
        sch.reverse_compute_at(cc, no)
        sch.decompose_reduction("C", ko)
    if parallel:
        sch.parallel(mo)
    return sch


@pytest.mark.parametrize("n", [64, 100, pl.var("n")], ids=["dividing", "100", "symbolic"])
def test_write_cache_at_a_tile_is_tile_sized(n):
    sch = write_cache_matmul(n, at_tile=True)
    kernel = lower(sch.program, sch.state.root)
    (cg,) = [t for t in kernel.temps if t.name == "C_global"]
    assert [d.value for d in cg.shape] == [32, 32]
    assert cg.scope is MemScope.LOCAL           # declared in the tile loop: one per thread
    assert any("C_global (scope global) holds the 32x32 elements used in one iteration of loop "
               "'j_0'" in note for note in kernel.notes)
    src = pl.build(sch).source
    assert "float C_global[32][32];" in src


def test_write_cache_at_the_root_stays_whole():
    sch = write_cache_matmul(48, at_tile=False)
    kernel = lower(sch.program, sch.state.root)
    (cg,) = [t for t in kernel.temps if t.name == "C_global"]
    assert [d.value for d in cg.shape] == [48, 48] and cg.scope is MemScope.GLOBAL


@pytest.mark.parametrize("n, size", [(100, None), (pl.var("n"), 75), (pl.var("n"), 128)])
def test_tile_sized_write_cache_matches_numpy(n, size, rng):
    m = size or n
    mod = pl.build(write_cache_matmul(n, at_tile=True))
    a = rng.random((m, m), dtype=np.float32)
    b = rng.random((m, m), dtype=np.float32)
    c = np.full((m, m), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_cache_read_at_a_loop_is_sized_to_its_footprint(rng):
    n = pl.var("n")
    A = pl.placeholder((n, 64), "float32", name="A")
    B = pl.compute((n, 64), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch = pl.Schedule(B)
    ag = sch.cache_read("B", "A", "global")
    i, j = sch.get_loops("B")
    i0, i1 = sch.split(i, [None, 8])
    sch.parallel(i0)
    sch.compute_at(ag, i0)
    kernel = lower(sch.program, sch.state.root)
    (t,) = [t for t in kernel.temps if t.name == "A_global"]
    assert [d.value for d in t.shape] == [8, 64]
    a = rng.random((29, 64), dtype=np.float32)
    out = np.full((29, 64), np.nan, np.float32)
    pl.build(sch)(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)
