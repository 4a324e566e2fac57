# SPDX-License-Identifier: Apache-2.0
"""Seed 000's kernels in the kernel language, shared by the OpenCL tests (tests/ is on sys.path,
like seed_scripts)."""
from __future__ import annotations

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
