# SPDX-License-Identifier: Apache-2.0
"""A check shared by the GPU matmul tests (tests/ is on sys.path, like polybench_scripts)."""
from __future__ import annotations

import numpy as np


def check_matmul(mod, sizes, rng):
    """``mod(a, b, c)`` equals ``a @ b`` at each ``(m, n, k)`` of ``sizes``, on fresh float32
    data, with ``c`` poisoned so that an element the kernel skips is caught."""
    for m, n, k in sizes:
        a = rng.standard_normal((m, k)).astype("float32")
        b = rng.standard_normal((k, n)).astype("float32")
        c = np.full((m, n), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
