# SPDX-License-Identifier: Apache-2.0
"""Matrix multiply followed by ReLU (the MLC course's first example), scheduled by hand.

Run: python examples/matmul_relu.py [n]
"""
import sys

import numpy as np

import polyloop as pl


def matmul_relu(n):
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    Y = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="Y")
    return pl.compute((n, n), lambda i, j: pl.maximum(Y[i, j], 0.0), name="C")


def schedule(C):
    sch = pl.Schedule(C)
    y = sch.get_block("Y")
    i, j, k = sch.get_loops(y)
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    sch.reverse_compute_at(sch.get_block("C"), j0)
    sch.decompose_reduction(y, k)
    return sch


def main(size):
    n = pl.var("n")                      # one kernel for every size
    sch = schedule(matmul_relu(n))
    print(sch)
    mod = pl.build(sch)
    a = np.random.rand(size, size).astype("float32") - 0.5
    b = np.random.rand(size, size).astype("float32") - 0.5
    c = np.full((size, size), np.nan, dtype="float32")     # every element must be written
    mod(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-5)
    seconds = mod.benchmark(a, b, c)
    print(f"n = {size}: {seconds * 1e3:.3f} ms, {2 * size ** 3 / seconds / 1e9:.1f} GFLOP/s; "
          "equal to NumPy")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
