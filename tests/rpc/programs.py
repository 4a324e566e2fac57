# SPDX-License-Identifier: Apache-2.0
"""Programs the RPC tests run on devices."""
from __future__ import annotations

import polyloop as pl


def matmul(n: object, m: object, p: object) -> pl.Tensor:
    """``C[n, m] = A[n, p] @ B[p, m]`` in float32; sizes are ints or ``pl.var``s."""
    A = pl.placeholder((n, p), "float32", name="A")
    B = pl.placeholder((p, m), "float32", name="B")
    k = pl.reduce_axis((0, p), name="k")
    return pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
