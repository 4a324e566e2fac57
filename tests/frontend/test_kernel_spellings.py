# SPDX-License-Identifier: Apache-2.0
"""Loo.py spellings of the kernel language that a tutorial uses first."""
from __future__ import annotations

import numpy as np

import polyloop as pl


def test_assume_then_fix_parameters_then_more_transformations(rng):
    knl = pl.make_kernel("{ [i]: 0<=i<n }", "out[i] = 2*a[i]")
    knl = pl.split_iname(knl, "i", 4)
    knl = pl.assume(knl, "n >= 1")
    knl = pl.fix_parameters(knl, n=18)
    assert knl.program.params == ()
    knl = pl.assume(knl, "0 = 0")        # a later step replays the earlier ones
    a = rng.standard_normal(18).astype("float32")
    out = np.full(18, np.nan, "float32")
    pl.build(knl)(a, out)
    np.testing.assert_array_equal(out, 2 * a)
