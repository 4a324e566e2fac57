# SPDX-License-Identifier: Apache-2.0
"""A local tile placed at a fused loop of one iteration (extents 1 x 1) inside a loop of one
iteration (a batch of one): isl gives every statement under such loops the same schedule point,
and may emit each child of the loop's body in a copy of its own of the loops above. The fused
loop was written as a ``for`` of one iteration in each copy, which read as copies over
disjoint iterations: the tile was declared in each, and its initialization, its updates and
its copy-out each saw their own array (a squeeze-excitation 1 x 1 convolution was off by
90 %)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyloop as pl


def _row_sums(batch, rows, cols, depth: int, *, parallel: bool, init: bool, staged: bool,
              place_first: bool = False):
    """``out[b, i, j] = 1 + sum_k A[b, i, j, k]`` through a local tile of C placed, with the
    epilogue, at the loop ``fuse(i, j)``. ``init``: the reduction's initialization decomposed
    at k; ``staged``: A's row read through a local copy computed at that loop too;
    ``place_first``: the stages placed at ``j`` before the fuse (a fused loop of symbolic
    extents takes no compute_at)."""
    A = pl.placeholder((batch, rows, cols, depth), "float32", name="A")
    k = pl.reduce_axis((0, depth), name="k")
    C = pl.compute((batch, rows, cols), lambda b, i, j: pl.sum(A[b, i, j, k], axis=k),
                   name="C")
    out = pl.compute((batch, rows, cols), lambda b, i, j: C[b, i, j] + 1.0, name="out")
    sch = pl.Schedule(out)
    tile = sch.cache_write("C", "local")
    copy = sch.cache_read("C", "A", "local") if staged else None
    _, i, j, kk = sch.get_loops("C")
    if init:
        sch.decompose_reduction("C", kk)
    at = j if place_first else sch.fuse(i, j)
    sch.reverse_compute_at(tile, at)
    sch.reverse_compute_at("out", at)
    if copy is not None:
        sch.compute_at(copy, at)
    if place_first:
        at = sch.fuse(i, j)
    if parallel:
        sch.parallel(at)
    return sch


def _check(mod, shape: tuple[int, int, int, int], rng) -> None:
    a = rng.standard_normal(shape, dtype=np.float32)
    got = np.full(shape[:3], np.nan, np.float32)     # poisoned: every element is written
    mod(a, got)
    np.testing.assert_allclose(got, a.sum(axis=3) + 1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 1, 6), (1, 5, 1), (2, 1, 1), (1, 3, 4)])
@pytest.mark.parametrize("parallel, init, staged, place_first", [
    (True, True, False, False), (True, False, True, False), (False, True, True, False),
    (True, True, True, True)])
def test_a_tile_at_a_fused_loop_of_constant_extents(rng, shape, parallel, init, staged,
                                                     place_first):
    sch = _row_sums(*shape, 7, parallel=parallel, init=init, staged=staged,
                    place_first=place_first)
    _check(pl.build(sch), (*shape, 7), rng)


def test_one_declaration_of_the_tile_for_its_one_iteration(rng):
    """The 1 x 1 x 1 case: the fused loop of one iteration gets no ``for`` (as isl writes
    none for a loop of one value), and the tile is declared once."""
    mod = pl.build(_row_sums(1, 1, 1, 9, parallel=True, init=True, staged=False))
    body = mod.source[mod.source.index("kernel_body"):]
    assert len(re.findall(r"float C_local\[", body)) == 1
    assert "for (int64_t i_j_fused" not in body
    _check(mod, (1, 1, 1, 9), rng)


@pytest.mark.parametrize("symbolic", ["batch", "rows", "cols", "all"])
def test_a_tile_at_a_fused_loop_of_sizes_that_may_be_one(rng, symbolic):
    n = {name: pl.var(name) if symbolic in (name, "all") else 1
         for name in ("batch", "rows", "cols")}
    sch = _row_sums(n["batch"], n["rows"], n["cols"], 5, parallel=True, init=True, staged=True,
                    place_first=True)
    mod = pl.build(sch)
    for sizes in [(1, 1, 1), (2, 1, 3), (1, 4, 1), (3, 2, 5)]:
        shape = tuple(1 if isinstance(n[name], int) else s
                      for s, name in zip(sizes, ("batch", "rows", "cols")))
        _check(mod, (*shape, 5), rng)
