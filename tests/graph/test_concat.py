# SPDX-License-Identifier: Apache-2.0
"""Concatenations of small images (SqueezeNet's Fire modules, Inception's branches): each
element of the result reads one input under a select, which gcc 12 at -O3 with AVX2/AVX-512
if-converted into wrong values (hundreds of elements of a 2 x 32 x 3 x 3 result) until such
kernels compiled without loop if-conversion. Outputs poisoned, every element compared."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op


@pytest.mark.parametrize("first, second, axis", [
    ((2, 16, 3, 3), (2, 16, 3, 3), 1),
    ((2, 16, 3, 3), (2, 16, 3, 3), 2),
    ((1, 3, 3, 3), (1, 16, 3, 3), 1),
    ((1, 16, 3, 3), (1, 16, 4, 3), 2),
])
def test_concatenation_of_small_images_equals_numpy(first, second, axis):
    b = pl.graph.GraphBuilder("cat")
    x, y = b.input("x", first), b.input("y", second)
    joined = b.emit(Op.CONCAT, b.emit(Op.RELU, x), b.emit(Op.RELU, y), axis=axis)
    ex = pl.graph.build(b.build(b.emit(Op.RELU, joined)))
    rng = np.random.default_rng(sum(first) + axis)
    a1 = rng.standard_normal(first, dtype=np.float32)
    a2 = rng.standard_normal(second, dtype=np.float32)
    want = np.concatenate([np.maximum(a1, 0), np.maximum(a2, 0)], axis=axis)
    out = np.full(want.shape, np.nan, np.float32)
    ex(a1, a2, out=(out,))
    np.testing.assert_array_equal(out, want)
