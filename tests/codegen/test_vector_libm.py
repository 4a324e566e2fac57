# SPDX-License-Identifier: Apache-2.0
"""Vectorized C library math (codegen/vector_libm.py): sin, cos, tan, erf, log, tanh, pow
through glibc's libmvec where it has them, floor, ceil, round, fmod lane by lane, isnan as
``x != x``, against NumPy/SciPy over wide ranges with special values (+-0, +-inf, NaN, huge
arguments of sin and cos), float32 and float64; and the lane-by-lane fallback of every function
(no libmvec) against the same references."""
from __future__ import annotations

import ctypes
import dataclasses

import numpy as np
import pytest
import scipy.special

from polyloop.codegen import generate_c
from polyloop.ir.elementwise import isnan, where
from polyloop.ir.expr import BinOpKind, UnaryKind, Var, binop, unary
from polyloop.ir.loops import Block, Kernel, LoopKind, Store
from polyloop.util.isa import host_isa

from .irbuild import F32, F64, OUT, buf, c, loop, param, poison

UNARY = {"sin": (UnaryKind.SIN, np.sin), "cos": (UnaryKind.COS, np.cos),
         "tan": (UnaryKind.TAN, np.tan), "erf": (UnaryKind.ERF, None),
         "log": (UnaryKind.LOG, np.log), "tanh": (UnaryKind.TANH, np.tanh),
         "floor": (UnaryKind.FLOOR, np.floor), "ceil": (UnaryKind.CEIL, np.ceil),
         "round": (UnaryKind.ROUND, np.rint)}
BINARY = {"pow": (BinOpKind.POW, np.power), "fmod": (BinOpKind.FMOD, np.fmod)}
OUTPUTS = [*UNARY, *BINARY, "nan_to_y"]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-30]
LARGE = {"float32": [1e30, -1e22, 3e38, 12345.678, 1e7 + 1], "float64": [1e300, -1e22, 1e15 + 3]}
EXACT = {"floor", "ceil", "round", "fmod", "nan_to_y"}
MAX_ULP = 4.0      # libmvec's documented bound; measured here: at most 3


def math_kernel(dtype) -> Kernel:
    n, j = param("n"), Var("j")
    X, Y = buf("X", (n,), dtype), buf("Y", (n,), dtype)
    outs = [buf(f"R_{name}", (n,), dtype, OUT) for name in OUTPUTS]
    values = [unary(op, X[j]) for op, _ in UNARY.values()]
    values += [binop(op, X[j], Y[j]) for op, _ in BINARY.values()]
    values.append(where(isnan(X[j]), Y[j], X[j]))
    body = Block(tuple(Store(b.name, (j,), v) for b, v in zip(outs, values)))
    return Kernel("vmath", (X, Y, *outs), ("n",), (), loop("j", n, body, LoopKind.VECTORIZED))


def inputs(rng, dtype):
    wide = rng.uniform(-100, 100, 3000)
    sign = np.where(rng.random(3000) < 0.5, -1.0, 1.0)
    huge = 30 if dtype == "float32" else 300
    scaled = sign * 10.0 ** rng.uniform(-huge, huge, 3000)
    x = np.concatenate([SPECIAL, LARGE[dtype], wide, scaled]).astype(dtype)
    y = np.concatenate([[0.0, -0.0, 2.0, np.nan, np.inf, 3.0, -1.0, 0.5, 1.0, 2.0, -3.0, 0.0,
                         np.nan], rng.uniform(-6, 6, x.size - len(SPECIAL))]).astype(dtype)
    return x, y


def reference(name: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The function in extended precision where NumPy has it (float64 for erf)."""
    wide = np.longdouble
    with np.errstate(all="ignore"):
        if name == "erf":
            return scipy.special.erf(x.astype(np.float64)).astype(wide)
        if name == "nan_to_y":
            return np.where(np.isnan(x), y, x).astype(wide)
        if name in BINARY:
            return BINARY[name][1](x.astype(wide), y.astype(wide))
        return UNARY[name][1](x.astype(wide))


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    info = np.finfo(got.dtype)
    with np.errstate(all="ignore"):
        nearest = exact.astype(got.dtype)
        ulp = np.maximum(np.spacing(np.abs(nearest)), info.smallest_subnormal)
        err = np.abs(got.astype(np.longdouble) - exact) / ulp
    return np.where(np.isfinite(nearest) & np.isfinite(got), err, 0.0)


def run(compile_c, dtype, isa, x, y):
    source = generate_c(math_kernel(F32 if dtype == "float32" else F64), isa=isa)
    lib = ctypes.CDLL(str(compile_c(source)[0]))
    outs = [poison(x.shape, dtype) for _ in OUTPUTS]
    args = (ctypes.c_void_p * (2 + len(outs)))(x.ctypes.data, y.ctypes.data,
                                                *(o.ctypes.data for o in outs))
    assert lib.vmath(args, (ctypes.c_int64 * 1)(x.size)) == 0
    return source, dict(zip(OUTPUTS, outs))


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    with np.errstate(over="ignore"):
        nearest = want.astype(got.dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(nearest), err_msg=name)
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(nearest), err_msg=name)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(nearest), err_msg=name)
    zero = nearest == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(nearest[zero]),
                                  err_msg=f"{name}: sign of zero")
    if name in EXACT:
        np.testing.assert_array_equal(got, nearest, err_msg=name)
    else:
        assert ulp_error(got, want).max() <= MAX_ULP, name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("libmvec", [True, False], ids=["libmvec", "lane_by_lane"])
def test_vector_math_matches_numpy(compile_c, rng, dtype, libmvec):
    isa = host_isa()
    if not libmvec:
        isa = dataclasses.replace(isa, glibc=None)
    elif isa.glibc is None or isa.glibc < (2, 35) or not isa.has("__x86_64__"):
        pytest.skip("glibc 2.35's libmvec on x86-64 is needed for every function")
    x, y = inputs(rng, dtype)
    source, got = run(compile_c, dtype, isa, x, y)
    assert ("_ZGV" in source) == libmvec
    if isa.has("__SSE4_1__"):      # floor, ceil, round: one rounding instruction
        assert "_MM_FROUND_TO_NEG_INF" in source and "floorf(x[l])" not in source
    assert "pl_sin_v" in source and "pl_pow_v" in source   # the loop was vectorized
    for name in OUTPUTS:
        check(name, got[name], reference(name, x, y))


def test_square_is_a_multiplication(compile_c, rng):
    """``x ** 2`` is ``x * x`` (pow(x, 2) exactly), not a call of the vector pow."""
    n, j = param("n"), Var("j")
    X, Y = buf("X", (n,), F32), buf("Y", (n,), F32, OUT)
    body = Store("Y", (j,), binop(BinOpKind.POW, X[j], c(2.0, F32)))
    source = generate_c(Kernel("sq", (X, Y), ("n",), (), loop("j", n, body, LoopKind.VECTORIZED)))
    assert "pl_pow_v" not in source and "pow" not in source.split("int32_t pl_sq_body(")[1]
    lib = ctypes.CDLL(str(compile_c(source)[0]))
    x = np.concatenate([[np.inf, -np.inf, np.nan, -0.0, 1e30], rng.standard_normal(37)])
    x = x.astype("float32")
    y = poison(x.shape, "float32")
    assert lib.sq((ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data),
                  (ctypes.c_int64 * 1)(x.size)) == 0
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(y, np.power(x, np.float32(2)))
