# SPDX-License-Identifier: Apache-2.0
"""What a program writes, checked when it is built: a temporary read before anything writes it
is refused (it would return whatever the memory held); an output the program does not write
everywhere is allocated zeroed, and the elements it does not write keep the caller's values
(OpenCL, and a layout copied back)."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()

LOOK_AHEAD = '''
def look_ahead(A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
    T = pl.alloc(("n",), "float32")
    for i in range(n):
        T[i] = A[i] * 2
        if i + 1 < n:
            B[i] = T[i + 1]
'''


def lower_triangle():
    return pl.make_kernel("{ [i, j] : 0 <= j <= i < n }", "out[i, j] = 2 * a[i, j]",
                          args=[pl.ArrayArg("out", "float32", shape=("n", "n")),
                                pl.ArrayArg("a", "float32", shape=("n", "n"))])


def test_a_temporary_read_before_it_is_written_is_refused():
    with pytest.raises(pl.BuildError, match=r"'B' reads T\[i \+ 1\] before any statement writes "
                                            r"it: with n = \d+, i = \d+ it reads T\[\d+\]; a "
                                            r"temporary has no initial value"):
        pl.build(pl.script(LOOK_AHEAD))


def test_reading_a_temporary_after_its_loop_builds(rng):
    prog = pl.script(LOOK_AHEAD.replace("        if i + 1 < n:\n            B[i] = T[i + 1]",
                                        "    for i in range(n - 1):\n        B[i] = T[i + 1]"))
    a = rng.standard_normal(9, dtype="float32")
    b = np.full(9, np.nan, "float32")
    pl.build(prog)(a, b)
    np.testing.assert_array_equal(b[:-1], 2 * a[1:])
    assert np.isnan(b[-1])       # never written: left as the caller had it


@pytest.mark.parametrize("n", [1, 6])
def test_outputs_not_written_everywhere_are_allocated_zeroed(rng, n):
    a = rng.standard_normal((n, n), dtype="float32")
    np.testing.assert_array_equal(pl.build(lower_triangle())(a=a), np.tril(2 * a))


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_opencl_keeps_the_callers_values_where_the_program_does_not_write(rng):
    mod = pl.build(lower_triangle(), target="opencl")
    a = rng.standard_normal((7, 7), dtype="float32")
    out = np.full((7, 7), -3.0, "float32")
    mod(a=a, out=out)
    np.testing.assert_array_equal(out, np.where(np.tri(7, dtype=bool), 2 * a, -3.0))
    np.testing.assert_array_equal(mod(a=a), np.tril(2 * a))


def test_transform_layout_copies_back_only_what_the_program_writes(rng):
    sch = pl.Schedule(lower_triangle().program)
    sch.transform_layout(sch.blocks()[0], "out", lambda i, j: (j, i))
    mod = pl.build(sch)
    a = rng.standard_normal((5, 5), dtype="float32")
    out = np.full((5, 5), -3.0, "float32")
    mod(a=a, out=out)
    np.testing.assert_array_equal(out, np.where(np.tri(5, dtype=bool), 2 * a, -3.0))
    np.testing.assert_array_equal(mod(a=a), np.tril(2 * a))
