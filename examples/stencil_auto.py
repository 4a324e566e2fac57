# SPDX-License-Identifier: Apache-2.0
"""A Jacobi 2-D stencil with a time loop, written as plain Python loops and scheduled by
pl.auto_schedule (fusion of the two sweeps, time tiling, parallel tiles).

Run: python examples/stencil_auto.py [n] [steps]
"""
import sys

import numpy as np

import polyloop as pl


@pl.script
def jacobi_2d(A: pl.Buffer[("n", "n"), "float64"], B: pl.Buffer[("n", "n"), "float64"],
              T: pl.Buffer[("t",), "float64"]):
    for s in range(t):  # noqa: F821 - t, n: the size parameters of the buffers' shapes
        for i in range(1, n - 1):  # noqa: F821
            for j in range(1, n - 1):  # noqa: F821
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):  # noqa: F821
            for j in range(1, n - 1):  # noqa: F821
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])


def reference(a, b, steps):
    for _ in range(steps):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                               + a[:-2, 1:-1])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1]
                               + b[:-2, 1:-1])


def main(n, steps):
    sch = pl.auto_schedule(jacobi_2d)
    print(sch)
    mod = pl.build(sch)
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    want_a, want_b = a.copy(), b.copy()
    reference(want_a, want_b, steps)
    mod(a, b, np.zeros(steps))
    np.testing.assert_allclose(a, want_a, rtol=1e-12)
    np.testing.assert_allclose(b, want_b, rtol=1e-12)
    print(f"n = {n}, {steps} steps: equal to NumPy")


if __name__ == "__main__":
    args = [int(v) for v in sys.argv[1:3]]
    main(*(args + [90, 7][len(args):]))
