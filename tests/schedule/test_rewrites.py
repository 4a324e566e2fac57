# SPDX-License-Identifier: Apache-2.0
"""Primitives that rewrite the program: ``cache_read``, ``cache_write``, ``rfactor`` and
``transform_layout``. The rewritten program means the same; later primitives are checked
against its own dependences."""
from __future__ import annotations

import numpy as np

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var, VarKind
from polyloop.ir.program import Buffer, BufferRole, Program, Statement

from .programs import (check_matmul_relu, check_stencil, indent_of, lines, matmul_sch, poisoned,
                       refused_unchanged, stencil)


# cache_read / cache_write ---------------------------------------------------------------------

def test_cache_read_adds_a_copy_block_that_compute_at_moves_into_a_tile(rng):
    sch, (i, j, k) = matmul_sch()
    i0, j0, i1, j1 = sch.tile(i, j, 8, 8)
    cb = sch.cache_read("C", "B", "shared")
    assert cb == pl.BlockHandle("B_shared")
    assert "B_shared[ax0, ax1] = B[ax0, ax1]" in lines(sch)
    assert "C[8 * i_0 + i_1, 8 * j_0 + j_1] += A[8 * i_0 + i_1, k] * B_shared[k, 8 * j_0 + j_1]" \
        in lines(sch)
    check_matmul_relu(sch, rng)
    sch.compute_at(cb, j0)
    text = lines(sch)
    # each column panel of B is copied once, in the first tile row that reads it
    assert "for ax1 in range(8 * j_0, min(n, 8 * j_0 + 8)):" in text
    assert "if i_0 == 0:" in text
    assert indent_of(sch, "B_shared[ax0, ax1] = B[ax0, ax1]") > indent_of(sch, "for j_0 in")
    check_matmul_relu(sch, rng)


def test_cache_read_of_a_row_computed_at_the_row_loop(rng):
    sch, (i, j, k) = matmul_sch()
    ca = sch.cache_read("C", "A", "local")
    sch.compute_at(ca, i)
    assert "for ax1 in range(n):" in lines(sch) and "A_local[i, ax1] = A[i, ax1]" in lines(sch)
    check_matmul_relu(sch, rng)


def test_cache_write_then_reverse_compute_at(rng):
    sch, (i, j, k) = matmul_sch()
    cw = sch.cache_write("C", "local")
    assert cw == pl.BlockHandle("C_local_out")
    assert "C_local[i, j] += A[i, k] * B[k, j]" in lines(sch)
    check_matmul_relu(sch, rng)
    sch.reverse_compute_at(cw, j)
    text = lines(sch)
    assert text[text.index("C_local[i, j] += A[i, k] * B[k, j]") + 1] == "C[i, j] = C_local[i, j]"
    sch.parallel(i)
    check_matmul_relu(sch, rng)


def test_cache_wrong_uses():
    sch, _ = matmul_sch()
    refused_unchanged(sch, lambda: sch.cache_read("C", "A", "texture"), "cache_read",
                      "unknown memory scope 'texture'", "'global', 'shared', 'local'")
    refused_unchanged(sch, lambda: sch.cache_write("C", "vram"), "cache_write",
                      "unknown memory scope 'vram'")
    refused_unchanged(sch, lambda: sch.cache_read("C", "C", "local"), "cache_read",
                      "block 'C' writes 'C'; use cache_write")
    refused_unchanged(sch, lambda: sch.cache_read("C", "Q", "local"), "cache_read",
                      "no buffer 'Q'", "A, B, C, D")
    refused_unchanged(sch, lambda: sch.cache_read("Z", "A", "local"), "no block named 'Z'")


# rfactor ------------------------------------------------------------------------------------

def test_rfactor_makes_the_reduction_parallel(rng):
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.parallel(k), "cannot parallelize loop 'k'", "rfactor")
    k0, k1 = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(k1)
    assert rf == pl.BlockHandle("C_rf")
    text = lines(sch)
    assert "C_rf[r, i, j] = 0.0" in text
    assert "C[i, j] += C_rf[r, i, j]" in text
    loops = sch.get_loops(rf)
    assert [x.name for x in loops] == ["i", "j", "k_0", "k_1"]
    sch.reorder(loops[3], *loops[:3])
    sch.parallel(loops[3])
    assert any(t.startswith("for k_1 in parallel(min(4, n)):") for t in lines(sch))
    check_matmul_relu(sch, rng)
    # the final reduction over r is still a reduction
    fi, fj, fr = sch.get_loops("C")
    refused_unchanged(sch, lambda: sch.parallel(fr), "cannot parallelize loop 'r'",
                      "between updates of a reduction")


def test_rfactor_of_a_max_with_the_factor_axis_last(rng):
    n = pl.var("n")
    X = pl.placeholder((n, 12), "float32", name="X")
    r = pl.reduce_axis((0, 12), name="r")
    M = pl.compute((n,), lambda i: pl.max(X[i, r], axis=r), name="M")
    sch = pl.Schedule(M)
    i, rr = sch.get_loops("M")
    rf = sch.rfactor(rr, factor_axis=1)
    assert "M_rf[i, r] = max(M_rf[i, r], X[i, r])" in lines(sch)
    sch.vectorize(sch.get_loops(rf)[1])
    x = rng.standard_normal((9, 12), dtype="float32")
    out = poisoned((9,))
    pl.build(sch)(x, out)
    np.testing.assert_array_equal(out, x.max(axis=1))


def test_rfactor_wrong_uses():
    sch, (i, j, k) = matmul_sch()
    refused_unchanged(sch, lambda: sch.rfactor(i), "rfactor: loop 'i' is not a reduction loop")
    refused_unchanged(sch, lambda: sch.rfactor(k), "rfactor: loop 'k' needs a constant extent")
    k0, k1 = sch.split(k, factors=[None, 4])
    refused_unchanged(sch, lambda: sch.rfactor(k1, factor_axis=3), "factor_axis must be in 0..2")
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.rfactor(dj), "rfactor", "exactly one reduction")


# transform_layout -----------------------------------------------------------------------------

def test_transform_layout_packs_b_into_column_panels(rng):
    sch, (i, j, k) = matmul_sch()
    sch.transform_layout("C", "B", lambda k, j: (j // 16, k, j % 16))
    text = lines(sch)
    assert "B_packed[ax1 // 16, ax0, ax1 % 16] = B[ax0, ax1]" in text
    assert "C[i, j] += A[i, k] * B_packed[j // 16, k, j % 16]" in text
    check_matmul_relu(sch, rng, sizes=(1, 15, 37))


def test_transform_layout_of_a_temporary_and_of_an_output(rng):
    sch, _ = matmul_sch()
    sch.transform_layout("C", "C", lambda a, b: (b, a))
    sch.transform_layout("D", "D", lambda a, b: (b, a))
    text = lines(sch)
    assert "C[j, i] += A[i, k] * B[k, j]" in text
    assert "D_packed[j, i] = max(C[j, i], 0.0)" in text
    assert "D[ax0, ax1] = D_packed[ax1, ax0]" in text
    check_matmul_relu(sch, rng)


def test_transform_layout_array_of_structures_to_structure_of_arrays(rng):
    n = pl.var("n")
    P = pl.placeholder((n, 3), "float32", name="P")          # xyz per point
    N = pl.compute((n,), lambda i: P[i, 0] * P[i, 0] + P[i, 1] * P[i, 1] + P[i, 2] * P[i, 2],
                   name="N")
    sch = pl.Schedule(N)
    sch.transform_layout("N", "P", lambda i, c: (c, i))
    assert "P_packed[ax1, ax0] = P[ax0, ax1]" in lines(sch)
    (i,) = sch.get_loops("N")
    sch.vectorize(i)
    p = rng.standard_normal((21, 3), dtype="float32")
    out = poisoned((21,))
    pl.build(sch)(p, out)
    np.testing.assert_allclose(out, (p.astype("float64") ** 2).sum(axis=1), rtol=1e-5)


def test_transform_layout_refuses_a_map_that_is_not_one_to_one():
    sch, _ = matmul_sch()
    refused_unchanged(sch, lambda: sch.transform_layout("C", "A", lambda a, b: (a // 2, b)),
                      "transform_layout", "sends two elements of 'A' to the same place")
    refused_unchanged(sch, lambda: sch.transform_layout("C", "A", lambda a: (a,)),
                      "transform_layout", "must take 2 indices of 'A'")
    refused_unchanged(sch, lambda: sch.transform_layout("C", "Q", lambda a, b: (b, a)),
                      "transform_layout", "no buffer 'Q'")


def test_cache_write_of_an_in_place_stencil_copies_in_what_it_reads(rng):
    """The stencil reads A's first row and column, which it never writes: the cache must start
    with them (and a reduction that initializes first needs no copy)."""
    sch = pl.Schedule(stencil())
    out = sch.cache_write("S", "local")
    text = lines(sch)
    assert "A_local[ax0, 0] = A[ax0, 0]" in text and "A_local[0, ax1] = A[0, ax1]" in text
    assert "A_local[i, j] = A_local[i - 1, j] + A_local[i, j - 1]" in text
    assert text[-1] == "A[ax0, ax1] = A_local[ax0, ax1]"
    check_stencil(sch, rng)
    i, j = sch.get_loops("S")
    sch.reverse_compute_at(out, j)
    check_stencil(sch, rng)
    refused_unchanged(sch, lambda: sch.compute_inline("S"), "compute_inline",
                      "'A_local' is written by other statements too")
    msch, _ = matmul_sch()
    msch.cache_write("C", "local")
    assert not any("_in[" in t or "C_local[ax0, ax1] = C[" in t for t in lines(msch))


def test_cache_write_twice_gets_fresh_names(rng):
    sch = pl.Schedule(stencil())
    first = sch.cache_write("S", "local")
    second = sch.cache_write("S", "local")
    assert first != second
    assert len({s.name for s in sch.program.statements}) == len(sch.program.statements)
    check_stencil(sch, rng)


def test_compute_inline_of_a_recurrence_is_refused():
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INPUT)
    T = Buffer("T", (n,), DType.FLOAT64, BufferRole.TEMP)
    B = Buffer("B", (n,), DType.FLOAT64, BufferRole.OUTPUT)
    i = Var("i")
    prog = Program("recurrence", (A, T, B), (
        Statement("T", ("i",), "[n] -> { T[i] : 0 <= i < n }", "T", (i,),
                  pl.where(i > 0, T[i - 1], 0.0) + A[i]),
        Statement("B", ("i",), "[n] -> { B[i] : 0 <= i < n }", "B", (i,), T[i] * 2.0),
    ), ("n",), ("A", "B"))
    sch = pl.Schedule(prog)
    refused_unchanged(sch, lambda: sch.compute_inline("T"), "compute_inline",
                      "block 'T' reads 'T', the buffer it writes (a recurrence)")
