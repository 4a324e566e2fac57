# SPDX-License-Identifier: Apache-2.0
"""Seed programs written as @pl.script loops, shared by the tests of the script front end and of
auto-scheduling (tests/ is on sys.path, like polybench_scripts)."""
from __future__ import annotations

import polyloop as pl


@pl.script
def stencil(A: pl.Buffer[("n", "n"), "float64"]):
    """Seed 002's in-place stencil."""
    for i in range(1, n):  # noqa: F821 - n is the size parameter of A's shape
        for j in range(1, n):  # noqa: F821
            A[i, j] = A[i - 1, j] + A[i, j - 1]


@pl.script
def mm_relu(A: pl.Buffer[("n", "l"), "float32"], B: pl.Buffer[("l", "m"), "float32"],
            C: pl.Buffer[("n", "m"), "float32"]):
    """Seed 001's NumPy-loop matmul + ReLU with symbolic sizes."""
    Y = pl.alloc(("n", "m"), "float32")
    for i in range(n):  # noqa: F821
        for j in range(m):  # noqa: F821
            for k in range(l):  # noqa: F821
                if k == 0:
                    Y[i, j] = 0
                Y[i, j] = Y[i, j] + A[i, k] * B[k, j]
    for i in range(n):  # noqa: F821
        for j in range(m):  # noqa: F821
            C[i, j] = max(Y[i, j], 0)
