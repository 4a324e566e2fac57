# SPDX-License-Identifier: Apache-2.0
"""A Loo.py-style kernel: a tiled matrix multiply on OpenCL work-groups, with the tiles of a and
b prefetched into local memory (barriers placed from exact dependences).

Run: python examples/opencl_kernel.py [n]     (needs PyOpenCL and an OpenCL platform)
"""
import sys

import numpy as np

import polyloop as pl


def tiled_matmul():
    knl = pl.make_kernel("{ [i, j, k] : 0 <= i, j, k < n }",
                         "c[i, j] = sum(k, a[i, k] * b[k, j])")
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.1", inner_tag="l.1")
    knl = pl.split_iname(knl, "j", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "k", 16)
    knl = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"])
    return pl.add_prefetch(knl, "b", ["k_inner", "j_inner"])


def main(n):
    mod = pl.build(tiled_matmul(), target="opencl")
    print(mod.source)
    a = np.random.rand(n, n).astype("float32")
    b = np.random.rand(n, n).astype("float32")
    np.testing.assert_allclose(mod(a, b), a @ b, rtol=1e-4)
    print(f"n = {n}: equal to NumPy")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 70)
