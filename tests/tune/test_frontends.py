# SPDX-License-Identifier: Apache-2.0
"""pl.tune on programs from every front end, with the generated space and the real local
runner (a few trials at small sizes; candidates built in this process to keep the tests fast,
the worker-process builder is the default of the other tests): the tuned kernel matches NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.tune.measure import LocalRunner, build_one


class InProcessBuilder:
    def build(self, jobs):
        return [build_one(j) for j in jobs]


def _poisoned(shape, dtype="float64"):
    return np.full(shape, np.nan, dtype)


def test_tune_make_kernel_matmul(tmp_path):
    knl = pl.make_kernel("{ [i, j, k] : 0 <= i < n and 0 <= j < m and 0 <= k < l }",
                         "c[i, j] = sum(k, a[i, k]*b[k, j])")
    res = pl.tune(knl, trials=3, seed=2, sizes={"n": 19, "m": 23, "l": 11},
                  work_dir=str(tmp_path),
                  runner=LocalRunner(repeat=1), builder=InProcessBuilder())
    assert any(r.status is Status.OK for r in res.history)
    mod = res.build()
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((21, 13)), rng.standard_normal((13, 26))
    names = [x.name for x in mod.args]
    arrays = {"a": a.astype(mod.args[names.index("a")].dtype.numpy),
              "b": b.astype(mod.args[names.index("b")].dtype.numpy)}
    c = _poisoned((21, 26), mod.args[names.index("c")].dtype.numpy)
    mod(**arrays, c=c)
    np.testing.assert_allclose(c, arrays["a"] @ arrays["b"], rtol=1e-4, atol=1e-4)


@pl.script
def jacobi(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
    for t in range(4):
        for i in range(1, n - 1):
            B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
        for i in range(1, n - 1):
            A[i] = B[i]


def _jacobi_numpy(a, b):
    for _ in range(4):
        b[1:-1] = (a[:-2] + a[1:-1] + a[2:]) / 3.0
        a[1:-1] = b[1:-1]


def test_tune_script_stencil(tmp_path):
    res = pl.tune(jacobi, trials=3, seed=0, sizes={"n": 37}, work_dir=str(tmp_path),
                  runner=LocalRunner(repeat=1), builder=InProcessBuilder())
    assert any(r.status is Status.OK for r in res.history)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(45), rng.standard_normal(45)
    a_ref, b_ref = a.copy(), b.copy()
    _jacobi_numpy(a_ref, b_ref)
    res.build()(a, b)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12)
    np.testing.assert_allclose(b[1:-1], b_ref[1:-1], rtol=1e-12)


def test_tune_tensor_expression_with_epilogue(tmp_path):
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    res = pl.tune(D, trials=3, seed=5, sizes={"n": 45}, work_dir=str(tmp_path),
                  runner=LocalRunner(repeat=1), builder=InProcessBuilder())
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((33, 33)).astype("float32") for _ in range(2))
    d = _poisoned((33, 33), "float32")
    res.build()(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    assert res.seconds > 0 and "TuneResult" in repr(res)
