# SPDX-License-Identifier: Apache-2.0
"""Built-in micro-kernels through tensorize, against NumPy at edge sizes."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.errors import ArgumentError
from polyloop.intrin import dot_intrin, gemm_intrin, host_kind
from polyloop.util.isa import host_isa
from seed_kernels import check_matvec, tensorized_matvec  # tests/ is on sys.path

HOST = host_isa(config.CONFIG.cc)
RUNS = {"avx512": HOST.name == "avx512", "avx2": HOST.name in ("avx512", "avx2") and HOST.fma,
        "portable": True}


def needs(isa: str):
    return pytest.mark.skipif(not RUNS[isa], reason=f"the host does not run {isa} code")


def gemm_module(g: pl.TensorIntrin, *, packed_a: bool = False):
    """Symbolic M x N x K matmul, B (and A) packed, tiled by the intrinsic's tile."""
    rows, cols, _ = g.extents
    M, N, K = pl.var("M"), pl.var("N"), pl.var("K")
    A = pl.placeholder((M, K), "float32", name="A")
    B = pl.placeholder((K, N), "float32", name="B")
    k = pl.reduce_axis((0, K), name="k")
    C = pl.compute((M, N), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = pl.Schedule(C)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    sch.transform_layout("C", "B", lambda k, j: (j // cols, k, j % cols))
    if packed_a:
        sch.transform_layout("C", "A", lambda i, k: (i // rows, k, i % rows))
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    sch.reorder(j0, i0, kk, i1, j1)
    sch.decompose_reduction(c, kk)
    sch.tensorize(kk, g)
    mod = pl.build(sch)
    assert f"{g.name}(&C[" in mod.source
    return mod


def sizes(rows: int, cols: int) -> list[tuple[int, int, int]]:
    """(m, n, k): k = 1, tile - 1, tile + 1; m and n 1, tile -1, tile + 1 and whole tiles."""
    return [(1, 1, 1), (rows - 1, cols - 1, rows - 1), (rows + 1, cols + 1, cols + 1),
            (2 * rows, 3 * cols, 1), (3 * rows + 1, 2 * cols - 1, 37), (rows, cols, 0)]


def check_gemm(mod, rows: int, cols: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for m, n, k in sizes(rows, cols):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        out = np.full((m, n), np.nan, dtype=np.float32)
        mod(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"{m}x{n}x{k}")


@pytest.mark.parametrize("isa, rows, cols, packed_a", [
    pytest.param("avx512", 6, 32, False, marks=needs("avx512")),
    pytest.param("avx512", 14, 32, True, marks=needs("avx512")),
    pytest.param("avx2", 6, 16, False, marks=needs("avx2")),
    pytest.param("portable", 6, 16, True, marks=needs("portable")),
])
def test_gemm_micro_kernel(isa, rows, cols, packed_a):
    g = gemm_intrin(isa, rows=rows, cols=cols, packed_a=packed_a)
    assert g.extents == (rows, cols, None)
    check_gemm(gemm_module(g, packed_a=packed_a), rows, cols, seed=rows * cols)


@pytest.mark.parametrize("isa", [pytest.param(k, marks=needs(k)) for k in ("avx512", "avx2",
                                                                           "portable")])
def test_dot_micro_kernel_in_a_matrix_vector_product(isa):
    mod = pl.build(tensorized_matvec(dot_intrin(isa)))
    assert f"pl_ukr_dot_{isa}(&y[i], &A[i][0], &x[0], K)" in mod.source
    check_matvec(mod, [(1, 1), (3, 15), (2, 17), (5, 31), (4, 33), (2, 100), (3, 0)], seed=7)


def test_host_choice_and_bad_requests():
    assert host_kind() in ("avx512", "avx2", "portable")
    g = gemm_intrin()
    assert g.name.startswith(f"pl_ukr_gemm_{host_kind()}_")
    with pytest.raises(ArgumentError, match="no avx2 gemm micro-kernel of 5 x 16"):
        gemm_intrin("avx2", rows=5)
    with pytest.raises(ArgumentError, match="unknown micro-kernel ISA 'sve'"):
        gemm_intrin("sve")
