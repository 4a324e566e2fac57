# SPDX-License-Identifier: Apache-2.0
"""C's scalar exp (``pl_exp_f32`` / ``pl_exp_f64``, codegen/vector_math.exp_scalar_body): the
same accuracy and special values as the vector exp, in a loop gcc vectorizes (libm's ``expf``
kept an unscheduled ``B[i] = exp(A[i])`` loop at one call per element)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen import generate_c
from polyloop.ir.expr import UnaryKind, Var, unary
from polyloop.ir.loops import Kernel, Store

from .irbuild import F32, F64, OUT, buf, loop, param
from .test_vector_exp import check_exp_kernel


def scalar_exp_kernel(dtype) -> Kernel:
    n, j = param("n"), Var("j")
    X, Y = buf("X", (n,), dtype), buf("Y", (n,), dtype, OUT)
    body = Store("Y", (j,), unary(UnaryKind.EXP, X[j]))
    return Kernel("sexp", (X, Y), ("n",), (), loop("j", n, body))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_exp_accuracy_and_special_values(compile_c, rng, dtype):
    src = generate_c(scalar_exp_kernel(F32 if dtype == "float32" else F64))
    name = "pl_exp_f32" if dtype == "float32" else "pl_exp_f64"
    assert f"{name}(X[j])" in src and "expf(" not in src
    lib = ctypes.CDLL(str(compile_c(src)[0]))
    check_exp_kernel(lib.sexp, rng, dtype, wide=100_003, small=20_001)


def test_gcc_vectorizes_a_loop_of_scalar_exp(compile_c):
    """The reason for the helper: no branch and no trapping conversion in its body."""
    _, notes = compile_c(generate_c(scalar_exp_kernel(F32)), ["-fopt-info-vec-optimized"])
    assert "loop vectorized" in notes, notes


def test_unscheduled_exp_matches_numpy_at_a_symbolic_size(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: pl.exp(A[i]) - pl.exp(-A[i]), name="B")
    mod = pl.build(B)
    assert "pl_exp_f32" in mod.source
    for size in (1, 17, 1001):
        a = (rng.random(size) * 40 - 20).astype(np.float32)
        b = np.full(size, np.nan, np.float32)
        mod(a, b)
        np.testing.assert_allclose(b, np.exp(a.astype(np.float64)) - np.exp(-a.astype(np.float64)),
                                   rtol=2e-6, atol=1e-6)
