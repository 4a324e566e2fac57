# SPDX-License-Identifier: Apache-2.0
"""Values read under a condition (padding, concatenation) come out right in scalar C code.

gcc 12 at -O3 with AVX2/AVX-512 miscompiles some loop nests whose select reads memory in an
arm; every shape below was wrong before the C printer turned loop if-conversion off for such
functions (``codegen/guarded_loads.py``)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen.guarded_loads import NO_IF_CONVERSION


@pytest.mark.parametrize("c, h, w, p", [(8, 12, 12, 2), (8, 14, 16, 3), (3, 14, 16, 2),
                                        (8, 12, 3, 3), (1, 5, 7, 1)])
def test_rows_padded_by_a_select(c, h, w, p, rng):
    x = pl.placeholder((c, h, w), "float32", name="x")
    y = pl.compute((c, h + 2 * p, w), lambda ch, i, j: pl.where((i >= p) & (i < h + p),
                                                                x[ch, i - p, j], 0.0), name="y")
    mod = pl.build(y)
    a = rng.standard_normal((c, h, w)).astype("float32")
    out = np.full((c, h + 2 * p, w), np.nan, "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, np.pad(a, ((0, 0), (p, p), (0, 0))))
    assert NO_IF_CONVERSION in mod.source


@pytest.mark.parametrize("n", [3, 4, 9])
def test_concatenation_by_a_select(n, rng):
    a = pl.placeholder((2, n, n), "float32", name="a")
    b = pl.placeholder((3, n, n), "float32", name="b")
    c = pl.compute((5, n, n), lambda k, i, j: pl.where(k < 2, a[k, i, j], b[k - 2, i, j]),
                   name="c")
    x = rng.standard_normal((2, n, n)).astype("float32")
    y = rng.standard_normal((3, n, n)).astype("float32")
    out = np.full((5, n, n), np.nan, "float32")
    pl.build(c)(x, y, out)
    np.testing.assert_array_equal(out, np.concatenate([x, y]))


def test_functions_without_guarded_loads_keep_if_conversion():
    x = pl.placeholder((64,), "float32", name="x")
    y = pl.compute((64,), lambda i: pl.where(x[i] > 0.0, x[i], 0.0), name="y")
    assert NO_IF_CONVERSION not in pl.build(y).source
