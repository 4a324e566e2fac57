# SPDX-License-Identifier: Apache-2.0
"""The vector exp (our own range reduction + polynomial, codegen/vector_math.py) against an
extended-precision reference: at most 1 ulp over the whole range, subnormal results included;
+inf above overflow, 0 below underflow, exp(-inf) = 0, exp(inf) = inf, NaN stays NaN."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from polyloop.codegen import generate_c
from polyloop.ir.expr import UnaryKind, Var, unary
from polyloop.ir.loops import Kernel, LoopKind, Store

from .irbuild import F32, F64, OUT, buf, loop, param, poison

SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 1e-7, np.inf, -np.inf, np.nan, -np.nan]
EDGES = {"float32": [88.72, 88.7228, 88.72284, 88.7229, 88.73, 89.0, 100.0, -87.33, -87.34,
                     -100.0, -103.2, -103.97, -103.98, -104.0, -110.0, 3e38, -3e38],
         "float64": [709.78, 709.782712893384, 709.7828, 710.0, -708.39, -708.4, -744.4,
                     -745.13, -745.14, -746.0, -800.0, 1e308, -1e308]}
RANGE = {"float32": 110.0, "float64": 750.0}


def exp_kernel(dtype) -> Kernel:
    n, j = param("n"), Var("j")
    X, Y = buf("X", (n,), dtype), buf("Y", (n,), dtype, OUT)
    body = Store("Y", (j,), unary(UnaryKind.EXP, X[j]))
    return Kernel("vexp", (X, Y), ("n",), (), loop("j", n, body, LoopKind.VECTORIZED))


def ulp_error(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - exp(x)| in units of the last place of the correctly rounded result."""
    info = np.finfo(got.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = np.exp(x.astype(np.longdouble))
        nearest = exact.astype(got.dtype)
        ulp = np.maximum(np.spacing(np.abs(nearest)), info.smallest_subnormal)
        err = np.abs(got.astype(np.longdouble) - exact) / ulp
    finite = np.isfinite(nearest) & np.isfinite(got)
    return np.where(finite, err, 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_vector_exp_accuracy_over_the_whole_range(compile_c, rng, dtype):
    src = generate_c(exp_kernel(F32 if dtype == "float32" else F64))
    assert "pl_exp_v" in src
    lib = ctypes.CDLL(str(compile_c(src)[0]))
    check_exp_kernel(lib.vexp, rng, dtype, wide=200_003, small=50_000)


def check_exp_kernel(entry, rng, dtype: str, *, wide: int, small: int) -> None:
    """Run a compiled ``Y[j] = exp(X[j])`` entry on the special values, the edges, ``wide``
    draws over the whole range and ``small`` tiny ones, into a poisoned output: the same
    infinities, zeros and NaNs as NumPy, and at most one ulp from the exact value."""
    spread = rng.uniform(-RANGE[dtype], RANGE[dtype], wide)
    tiny = rng.uniform(-1, 1, small) * 10.0 ** rng.uniform(-40, 0, small)
    x = np.concatenate([SPECIAL, EDGES[dtype], spread, tiny]).astype(dtype)
    y = poison(x.shape, dtype)
    args = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    assert entry(args, (ctypes.c_int64 * 1)(x.size)) == 0
    with np.errstate(over="ignore"):
        want = np.exp(x)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(y), np.isposinf(want))
    np.testing.assert_array_equal(y == 0, want == 0)
    assert ulp_error(y, x).max() <= 1.0


def test_vector_exp_survives_fast_math(compile_c, rng):
    """-ffast-math (pl.build(..., fast_math=True)) may reassociate: the range reduction must
    not depend on a rounding trick that reassociation folds away. Finite range only: fast-math
    assumes no NaN or infinity, and accuracy is a few ulp, not 1. The flags are -ffast-math's
    parts but the one that links crtfastmath.o, which would flush subnormals to zero in this
    whole test process."""
    flags = ["-fassociative-math", "-freciprocal-math", "-fno-signed-zeros", "-fno-trapping-math",
             "-ffinite-math-only", "-fno-math-errno"]
    lib = ctypes.CDLL(str(compile_c(generate_c(exp_kernel(F32)), flags)[0]))
    x = rng.uniform(-87, 88, 100_001).astype("float32")
    y = poison(x.shape, "float32")
    args = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    assert lib.vexp(args, (ctypes.c_int64 * 1)(x.size)) == 0
    # reassociation merges the two parts of ln 2: a few ulp (measured 4.5), not 1
    assert ulp_error(y, x).max() <= 8.0
