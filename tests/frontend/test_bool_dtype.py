# SPDX-License-Identifier: Apache-2.0
"""bool arrays (NumPy's one byte of 0 or 1) in the three front ends, on C and OpenCL: inputs,
outputs and temporaries, conditions, casts, and counts over them, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

TARGETS = ["c", "opencl"]


def _opencl(target):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the OpenCL target needs pyopencl")


@pytest.fixture(scope="module")
def te_program():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "bool", name="A")
    X = pl.placeholder((n, m), "float32", name="X")
    T = pl.compute((n, m), lambda i, j: A[i, j] | (X[i, j] > 0.7), name="T")   # a bool temp
    k = pl.reduce_axis((0, m), name="k")
    cnt = pl.compute((n,), lambda i: pl.sum(T[i, k].astype("int32"), axis=k), name="cnt")
    flip = pl.compute((n, m), lambda i, j: ~T[i, j] & (X[i, j] < 0.9), name="flip")
    val = pl.compute((n, m), lambda i, j: pl.where(flip[i, j], X[i, j], -1.0)
                     + A[i, j].astype("float32"), name="val")
    return cnt, flip, val


@pytest.mark.parametrize("target", TARGETS)
def test_te_bool_inputs_temporaries_and_outputs(te_program, target, rng):
    _opencl(target)
    cnt, flip, val = te_program
    sch = pl.Schedule(cnt, flip, val)
    if target == "c":
        j = sch.get_loops(sch.get_block("flip"))[1]
        sch.vectorize(sch.split(j, factor=8)[1])
    mod = pl.build(sch, target=target)
    a = rng.random((7, 19)) > 0.6
    x = rng.random((7, 19)).astype("float32")
    got_cnt = np.full(7, -1, "int32")
    got_flip = np.ones((7, 19), bool)
    got_val = np.full((7, 19), np.nan, "float32")
    mod(a, x, got_cnt, got_flip, got_val)
    t = a | (x > 0.7)
    want_flip = ~t & (x < 0.9)
    np.testing.assert_array_equal(got_cnt, t.sum(axis=1))
    np.testing.assert_array_equal(got_flip, want_flip)
    np.testing.assert_array_equal(got_val, np.where(want_flip, x, np.float32(-1)) + a)
    assert got_flip.view(np.uint8).max() <= 1      # stored as NumPy's 0/1 bytes


SCRIPT = '''
def mask(A: pl.Buffer[("n",), "bool"], X: pl.Buffer[("n",), "float32"],
         M: pl.Buffer[("n",), "bool"], Y: pl.Buffer[("n",), "float32"]):
    for i in range(A.shape[0]):
        M[i] = A[i] and X[i] > 0.5
        Y[i] = pl.where(M[i], X[i], -X[i])
'''


@pytest.mark.parametrize("target", TARGETS)
def test_script_and_kernel_bool_arrays(target, rng):
    _opencl(target)
    a = rng.random(37) > 0.5
    x = rng.random(37).astype("float32")
    m, y = np.ones(37, bool), np.full(37, np.nan, "float32")
    pl.build(pl.Schedule(pl.script(SCRIPT)), target=target)(a, x, m, y)
    np.testing.assert_array_equal(m, a & (x > 0.5))
    np.testing.assert_array_equal(y, np.where(m, x, -x))
    knl = pl.make_kernel("{ [i]: 0 <= i < n }", "m[i] = a[i] and not (x[i] > 0.5)",
                         [pl.ArrayArg("a", "bool", ("n",)), pl.ArrayArg("x", "float32", ("n",)),
                          pl.ArrayArg("m", "bool", ("n",))])
    m = np.ones(37, bool)
    pl.build(knl, target=target)(a=a, x=x, m=m)
    np.testing.assert_array_equal(m, a & ~(x > 0.5))


def test_reductions_over_bool_values_name_the_cast():
    A = pl.placeholder((3, 4), "bool", name="A")
    k = pl.reduce_axis((0, 4), name="k")
    with pytest.raises(pl.PolyloopError, match=r"max\(\.\.\., axis=\) over bool .*astype"):
        pl.compute((3,), lambda i: pl.max(A[i, k], axis=k))
    with pytest.raises(pl.PolyloopError, match=r"arithmetic '\+' on booleans"):
        pl.compute((3,), lambda i: A[i, 0] + A[i, 1])
