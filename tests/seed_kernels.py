# SPDX-License-Identifier: Apache-2.0
"""Kernels shared by several test files (tests/ is on sys.path, like seed_scripts): seed 000's
in the kernel language, and a matrix-vector product with its dot product tensorized."""
from __future__ import annotations

import numpy as np

import polyloop as pl


def tiled_matmul(prefetch: bool):
    """The benchmark matmul: i, j split by 16 onto work-groups/work-items, k split by 16; with
    ``prefetch`` the a and b tiles go through local memory."""
    knl = pl.make_kernel("{ [i, j, k] : 0 <= i, j, k < n }", "c[i, j] = sum(k, a[i, k]*b[k, j])")
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "k", 16)
    if prefetch:
        knl = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"])
        knl = pl.add_prefetch(knl, "b", ["k_inner", "j_inner"])
    return knl


def tensorized_matvec(dot: pl.TensorIntrin) -> pl.Schedule:
    """``y[i] = sum(k, A[i, k] * x[k])`` over symbolic M x K, the reduction initialized apart
    and its k loop replaced by the dot-product intrinsic ``dot``."""
    M, K = pl.var("M"), pl.var("K")
    A = pl.placeholder((M, K), "float32", name="A")
    x = pl.placeholder((K,), "float32", name="x")
    k = pl.reduce_axis((0, K), name="k")
    y = pl.compute((M,), lambda i: pl.sum(A[i, k] * x[k], axis=k), name="y")
    sch = pl.Schedule(y)
    c = sch.get_block("y")
    _, kk = sch.get_loops(c)
    sch.decompose_reduction(c, kk)
    sch.tensorize(kk, dot)
    return sch


def check_matvec(mod, sizes, seed: int) -> None:
    """``mod`` (built from ``tensorized_matvec``) against NumPy on fresh data of each (M, K),
    every output element poisoned first."""
    rng = np.random.default_rng(seed)
    for m, n in sizes:
        a = rng.standard_normal((m, n), dtype=np.float32)
        v = rng.standard_normal(n, dtype=np.float32)
        out = np.full(m, np.nan, dtype=np.float32)
        mod(a, v, out)
        np.testing.assert_allclose(out, a @ v, rtol=1e-4, atol=1e-4, err_msg=f"{m}x{n}")
