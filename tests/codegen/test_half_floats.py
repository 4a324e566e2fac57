# SPDX-License-Identifier: Apache-2.0
"""bfloat16 (and float16 on the GPU targets): stored in 16 bits, every operation computed in
float32 and rounded to nearest even. Results are compared with ``ml_dtypes`` arithmetic (which
rounds the same way, so the match is exact) at symbolic, odd sizes, outputs poisoned with NaN;
on OpenCL (PoCL, no cl_khr_fp16) and as CUDA source compiled by nvcc."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen.half import bfloat16_bits, rounded
from polyloop.ir.dtypes import DType
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 arrays need ml_dtypes")
BF16 = ml_dtypes.bfloat16
OPENCL, OPENCL_WHY = platform_available()
NVCC, NVCC_WHY = nvcc_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
needs_nvcc = pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")
NP = {"bfloat16": BF16, "float16": np.float16}


def _elementwise(dtype: str):
    n = pl.var("n")
    A = pl.placeholder((n,), dtype, name="A")
    B = pl.placeholder((n,), dtype, name="B")
    C = pl.compute((n,), lambda i: pl.maximum(A[i] * B[i] + 1.5, A[i] - B[i]), name="C")
    D = pl.compute((n,), lambda i: pl.where(C[i] > 0.0, C[i].astype("float32") * 2, -1.0),
                   name="D")
    return C, D


def _expected(a, b, t):
    c = np.maximum(a * b + t(1.5), a - b)
    with np.errstate(invalid="ignore"):
        return c, np.where(c > t(0), c.astype(np.float32) * 2, np.float32(-1))


def _inputs(rng, t, size=37):
    a = rng.standard_normal(size).astype(t)
    b = rng.standard_normal(size).astype(t)
    a[3] = np.nan
    return a, b


def _check(mod, rng, t):
    a, b = _inputs(rng, t)
    c, d = np.full(37, np.nan, t), np.full(37, np.nan, np.float32)
    mod(A=a, B=b, C=c, D=d)
    ec, ed = _expected(a, b, t)
    np.testing.assert_array_equal(c.astype(np.float32), ec.astype(np.float32))
    np.testing.assert_array_equal(d, ed)


def test_rounding_of_constants_matches_ml_dtypes():
    for v in (1.0, -2.5, 1.00390625, 3.14159, 1e-40, 3.0e38, np.inf, -np.inf):
        assert rounded(v, DType.BFLOAT16) == float(np.float32(BF16(v))), v
    assert bfloat16_bits(float("nan")) & 0x7FC0 == 0x7FC0


def test_bfloat16_on_c_is_exactly_ml_dtypes_arithmetic(rng):
    C, D = _elementwise("bfloat16")
    mod = pl.build(pl.Schedule(C, D), target="c")
    assert "uint16_t" in mod.source and "pl_f32_to_bf16" in mod.source
    _check(mod, rng, BF16)


def test_bfloat16_sum_accumulates_in_float32(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "bfloat16", name="A")
    k = pl.reduce_axis((0, m), name="k")
    S = pl.compute((n,), lambda i: pl.sum(A[i, k].astype("float32"), axis=k), name="S")
    a = rng.standard_normal((13, 29)).astype(BF16)
    got = np.full(13, np.nan, np.float32)
    pl.build(S)(a, got)
    np.testing.assert_allclose(got, a.astype(np.float32).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_bfloat16_in_the_script_and_kernel_front_ends(rng):
    @pl.script
    def scale(x: pl.Buffer[("n",), "bfloat16"], y: pl.Buffer[("n",), "bfloat16"]):
        for i in range(x.shape[0]):
            y[i] = x[i] * 3.0
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "y[i] = bfloat16(2 * x[i])",
                         args=[pl.ArrayArg("x", "float32"), pl.ArrayArg("y", "bfloat16")])
    x = rng.standard_normal(19).astype(BF16)
    y = np.full(19, np.nan, BF16)
    pl.build(scale)(x, y)
    np.testing.assert_array_equal(y.astype(np.float32), (x * BF16(3)).astype(np.float32))
    x32 = rng.standard_normal(19).astype(np.float32)
    pl.build(knl)(x32, y)
    np.testing.assert_array_equal(y, (2 * x32).astype(BF16))


def test_wrong_dtype_argument_names_the_conversion(rng):
    C, _ = _elementwise("bfloat16")
    mod = pl.build(C)
    with pytest.raises(pl.ArgumentError, match="bfloat16"):
        mod(np.ones(5, np.float32), np.ones(5, np.float32))


def _gpu_schedule(dtype: str) -> pl.Schedule:
    C, D = _elementwise(dtype)
    sch = pl.Schedule(C, D)
    for block in ("C", "D"):
        (i,) = sch.get_loops(block)
        i0, i1 = sch.split(i, [None, 16])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
    return sch


@needs_opencl
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_floats_on_opencl_without_cl_khr_fp16(rng, dtype):
    mod = pl.build(_gpu_schedule(dtype), target="opencl")
    assert "ushort" in mod.source and "cl_khr_fp16" not in mod.source
    _check(mod, rng, NP[dtype])


@needs_nvcc
@pytest.mark.parametrize("dtype,ctype,header", [("bfloat16", "__nv_bfloat16", "cuda_bf16.h"),
                                                ("float16", "__half", "cuda_fp16.h")])
def test_half_floats_compile_for_cuda(dtype, ctype, header):
    mod = pl.build(_gpu_schedule(dtype), target="cuda")
    assert f"#include <{header}>" in mod.source and f"const {ctype} *__restrict__ A" in mod.source
    assert ".entry" in mod.ptx


def test_torch_cuda_bfloat16_tensors_are_read_without_cuda_array_interface():
    from polyloop.runtime.cuda import _cuda_interface

    class Bf16CudaTensor:   # what the runtime reads of a torch CUDA bfloat16 tensor
        dtype, is_cuda, shape = "torch.bfloat16", True, (2, 3)

        def data_ptr(self):
            return 4096

        def stride(self):
            return (3, 1)
    iface = _cuda_interface(Bf16CudaTensor())
    assert iface["dtype"] == np.dtype(BF16) and iface["strides"] == (6, 2)
    assert iface["data"][0] == 4096 and _cuda_interface(np.zeros(3)) is None


def test_reference_interpreter_rounds_bfloat16_like_the_c_target(rng):
    from polyloop.testing import interpret
    C, _ = _elementwise("bfloat16")
    a, b = _inputs(rng, BF16)
    got = pl.build(C)(a, b)
    np.testing.assert_array_equal(interpret(pl.to_program(C), a, b).astype(np.float32),
                                  got.astype(np.float32))


@pytest.mark.parametrize("target", ["c", pytest.param("opencl", marks=needs_opencl)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reductions_in_16_bits_round_every_step(rng, dtype, target):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), dtype, name="A")
    k = pl.reduce_axis((0, m), name="k")
    S = pl.compute((n,), lambda i: pl.max(A[i, k] * 2.0, axis=k), name="S")
    P = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="P")
    sch = pl.Schedule(S, P)
    if target == "opencl":
        for block in ("S", "P"):
            i, _ = sch.get_loops(block)
            i0, i1 = sch.split(i, [None, 4])
            sch.bind(i0, "blockIdx.x")
            sch.bind(i1, "threadIdx.x")
    t = NP[dtype]
    a = rng.standard_normal((13, 9)).astype(t)
    s, p = np.full(13, np.nan, t), np.full(13, np.nan, t)
    pl.build(sch, target=target)(A=a, S=s, P=p)
    total = np.zeros(13, t)
    for j in range(9):           # a sum stored in 16 bits is rounded after every addition
        total = total + a[:, j]
    np.testing.assert_array_equal(s.astype(np.float32), (a * t(2)).max(axis=1).astype(np.float32))
    np.testing.assert_array_equal(p.astype(np.float32), total.astype(np.float32))
