# SPDX-License-Identifier: Apache-2.0
"""Vectorized loops become explicit vector code (GCC vector extensions) that computes NumPy's
answer: at extents that do not divide the lane count, symbolic or constant, for every vector
dtype, with broadcast operands, masked (AVX-512) or scalar (other ISAs) remainders; what has no
vector form falls back to ``#pragma omp simd`` and says why."""
from __future__ import annotations

import re
from typing import Callable, Sequence

import numpy as np
import pytest

from polyloop.codegen.vector_plan import (Epilogue, NotVectorized, VectorPlan, choose_lanes,
                                          masked_epilogue_available, plan_vector_loop,
                                          proven_aligned)
from polyloop.config import CONFIG
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import BinOpKind, ReduceKind, UnaryKind, Var, binop, select, unary
from polyloop.ir.loops import Block, Kernel, LoopKind, Store
from polyloop.ir.program import MemScope
from polyloop.util.isa import classify, host_isa

from .irbuild import F32, F64, I32, I64, OUT, TEMP, buf, c, loop, param, poison

n, m = param("n"), param("m")
i, j, k = Var("i"), Var("j"), Var("k")
V = LoopKind.VECTORIZED
AVX2 = classify(frozenset({"__AVX2__", "__AVX__", "__FMA__", "__SSE2__"}))
SSE = classify(frozenset({"__SSE2__"}))
AVX512 = classify(frozenset({"__AVX512F__", "__AVX512VL__", "__AVX2__", "__AVX__", "__SSE2__"}))
HOST = host_isa(CONFIG.cc)
NP = {F32: "float32", F64: "float64", I32: "int32", I64: "int64"}
ODD_SIZES = [1, 15, 16, 17, 33]


@pytest.fixture
def run(build: Callable[..., tuple]) -> Callable[..., str]:
    """run(kernel, arrays, params, isa=None) compiles for ``isa`` and calls; returns the C."""
    def run_once(kernel: Kernel, arrays: Sequence[np.ndarray], params: Sequence[int] = (),
                 isa=None) -> str:
        call, source = build(kernel, isa)
        call(arrays, params)
        return source
    return run_once


def data(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, shape).astype(dtype)


def axpy_kernel(extent, dtype: DType = F32) -> Kernel:
    """Y[j] = A[j] * 3 + B[j], over a symbolic or constant extent."""
    A, B = buf("A", (extent,), dtype), buf("B", (extent,), dtype)
    Y = buf("Y", (extent,), dtype, OUT)
    body = Store("Y", (j,), A[j] * c(3, dtype) + B[j])
    return Kernel("axpy", (A, B, Y), ("n",) if extent is n else (), (), loop("j", extent, body, V))


def check_axpy(call: Callable[..., None], rng: np.random.Generator, size: int,
               params: Sequence[int]) -> None:
    a, b, y = data(rng, size, "float32"), data(rng, size, "float32"), poison((size,), "float32")
    call([a, b, y], params)
    np.testing.assert_allclose(y, a * 3 + b, rtol=1e-6, atol=1e-6)  # gcc may contract to fma


def test_symbolic_extent(build, rng):
    call, src = build(axpy_kernel(n))
    for size in [0] + ODD_SIZES:
        check_axpy(call, rng, size, [size])
    assert "typedef float v" in src and "omp simd" not in src
    if HOST.name == "avx512":
        assert "pl_store_masked_v16f(&Y[j]" in src


@pytest.mark.parametrize("size", ODD_SIZES)
def test_constant_extents(build, rng, size):
    call, src = build(axpy_kernel(size))
    check_axpy(call, rng, size, [])
    assert "typedef float v" in src and "omp simd" not in src


@pytest.mark.parametrize("isa", [AVX2, SSE], ids=["avx2", "sse"])
def test_other_isas_use_a_scalar_remainder_loop(build, rng, isa):
    call, src = build(axpy_kernel(n), isa)
    for size in [1, 3, 7, 8, 9, 33]:
        check_axpy(call, rng, size, [size])
    lanes = isa.vector_bytes // 4
    assert f"typedef float v{lanes}f __attribute__((vector_size({isa.vector_bytes})));" in src
    assert "scalar remainder loop" in src and "immintrin" not in src


@pytest.mark.parametrize("dtype", [F32, F64, I32, I64], ids=lambda d: d.value)
def test_arithmetic_min_max_abs_neg_for_every_dtype(build, rng, dtype):
    A, B, Y = buf("A", (n,), dtype), buf("B", (n,), dtype), buf("Y", (n,), dtype, OUT)
    value = binop(BinOpKind.MAX, A[j] - B[j] * c(2, dtype), -A[j]) + \
        binop(BinOpKind.MIN, unary(UnaryKind.ABS, B[j]), c(100, dtype))
    kernel = Kernel("arith", (A, B, Y), ("n",), (), loop("j", n, Store("Y", (j,), value), V))
    call, src = build(kernel)
    for size in (1, 7, 17, 33):
        a, b = data(rng, size, NP[dtype]), data(rng, size, NP[dtype])
        y = poison((size,), NP[dtype])
        call([a, b, y], [size])
        want = np.maximum(a - b * 2, -a) + np.minimum(np.abs(b), 100)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert "pl_max_v" in src and "omp simd" not in src


def broadcast_kernel() -> Kernel:
    """Y[i, j] = X[i, j] / S[i] + T[0]: S[i] and T[0] are invariant in j."""
    X, S, T = buf("X", (m, n), F32), buf("S", (m,), F32), buf("T", (1,), F32)
    Y = buf("Y", (m, n), F32, OUT)
    body = Store("Y", (i, j), X[i, j] / S[i] + T[c(0, I64)])
    return Kernel("scale", (X, S, T, Y), ("m", "n"), (), loop("i", m, loop("j", n, body, V)))


def test_invariant_operands_are_broadcast_once_before_the_loop(build, rng):
    call, src = build(broadcast_kernel())
    for cols in (0, 1, 15, 17, 40):
        x, s, t = data(rng, (3, cols), "float32"), data(rng, 3, "float32"), data(rng, 1, "float32")
        y = poison((3, cols), "float32")
        call([x, s, t, y], [3, cols])
        np.testing.assert_allclose(y, x / s[:, None] + t[0], rtol=1e-6, atol=1e-6)
    lines = [ln.strip() for ln in src.splitlines()]
    hoisted = [no for no, ln in enumerate(lines) if re.match(r"const v\d+f pl_bc\d = ", ln)]
    first_vector_loop = next(no for no, ln in enumerate(lines) if ln.startswith("for (; j"))
    assert len(hoisted) == 2 and max(hoisted) < first_vector_loop
    assert "if (0 < n) {" in lines   # nothing is read when the loop is empty


def test_strided_access_falls_back_to_omp_simd_and_says_why(run, rng):
    A, Y = buf("A", (2 * n,), F32), buf("Y", (n,), F32, OUT)
    kernel = Kernel("stride2", (A, Y), ("n",), (), loop("j", n, Store("Y", (j,), A[j * 2]), V))
    a, y = data(rng, 34, "float32"), poison((17,), "float32")
    src = run(kernel, [a, y], [17])
    np.testing.assert_array_equal(y, a[::2])
    assert "no explicit vector code (it reads A at non-contiguous elements" in src
    assert "#pragma omp simd" in src and "typedef" not in src


def test_transposed_read_falls_back(run, rng):
    A, Y = buf("A", (n, n), F32), buf("Y", (n, n), F32, OUT)
    body = loop("i", n, loop("j", n, Store("Y", (i, j), A[j, i] + 1.0), V))
    a, y = data(rng, (19, 19), "float32"), poison((19, 19), "float32")
    src = run(Kernel("transpose", (A, Y), ("n",), (), body), [a, y], [19])
    np.testing.assert_array_equal(y, a.T + np.float32(1))
    assert "#pragma omp simd" in src


@pytest.mark.parametrize("op", [BinOpKind.FLOORDIV, BinOpKind.MOD])
def test_operations_without_a_vector_form_fall_back(run, rng, op):
    A, Y = buf("A", (n,), F32), buf("Y", (n,), F32, OUT)
    body = Store("Y", (j,), binop(op, A[j], c(0.75, F32)))
    kernel = Kernel("fn", (A, Y), ("n",), (), loop("j", n, body, V))
    a, y = data(rng, 21, "float32") * 10, poison((21,), "float32")
    src = run(kernel, [a, y], [21])
    want = a // np.float32(0.75) if op is BinOpKind.FLOORDIV else a % np.float32(0.75)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    assert f"'{op.value}' has no vector form here" in src


def test_select_comparisons_casts_and_mixed_widths(build, rng):
    """float32 inputs, a float64 output: 8 lanes on AVX-512; a float32 comparison selects
    float64 values (its mask is widened); an invariant condition on i joins with &."""
    A, B = buf("A", (m, n), F32), buf("B", (m, n), I32)
    Y = buf("Y", (m, n), F64, OUT)
    cond = (A[i, j] > 0.25) & ~(B[i, j] == 3) | (i == 1)
    value = select(cond, A[i, j].astype("float64") * 2.0, B[i, j].astype("float64") - 0.5)
    body = loop("i", m, loop("j", n, Store("Y", (i, j), value), V))
    call, src = build(Kernel("sel", (A, B, Y), ("m", "n"), (), body))
    for size in (5, 16, 23):
        a, b = data(rng, (3, size), "float32"), rng.integers(0, 5, (3, size)).astype("int32")
        y = poison((3, size), "float64")
        call([a, b, y], [3, size])
        rows = np.arange(3)[:, None] == 1
        want = np.where((a > 0.25) & ~(b == 3) | rows, a.astype("float64") * 2, b - 0.5)
        np.testing.assert_array_equal(y, want)
    assert "__builtin_convertvector" in src and "pl_select_v" in src and "omp simd" not in src


@pytest.mark.parametrize("dtype", [F32, F64], ids=lambda d: d.value)
def test_sqrt_and_exp(run, rng, dtype):
    A, Y = buf("A", (n,), dtype), buf("Y", (n,), dtype, OUT)
    value = unary(UnaryKind.SQRT, unary(UnaryKind.ABS, A[j])) + unary(UnaryKind.EXP, A[j])
    kernel = Kernel("fns", (A, Y), ("n",), (), loop("j", n, Store("Y", (j,), value), V))
    a, y = data(rng, 37, NP[dtype]), poison((37,), NP[dtype])
    src = run(kernel, [a, y], [37])
    np.testing.assert_allclose(y, np.sqrt(np.abs(a)) + np.exp(a), rtol=2e-6)
    assert "pl_exp_v" in src and "pl_sqrt_v" in src


def test_reduction_updates_along_an_outer_loop(run, rng):
    """M[j] = max over k of A[k, j] and S[j] = sum: the accumulators are contiguous in j."""
    A = buf("A", (m, n), F32)
    M, S = buf("M", (n,), F32, OUT), buf("S", (n,), F32, OUT)
    init = loop("j", n, Block((Store("M", (j,), c(float("-inf"), F32)),
                               Store("S", (j,), c(0.0, F32)))), V)
    update = loop("k", m, loop("j", n, Block((
        Store("M", (j,), A[k, j], ReduceKind.MAX), Store("S", (j,), A[k, j], ReduceKind.SUM))), V))
    a = data(rng, (6, 35), "float32")
    a[2, 7] = np.nan
    mx, sm = poison((35,), "float32"), poison((35,), "float32")
    src = run(Kernel("colred", (A, M, S), ("m", "n"), (), Block((init, update))), [a, mx, sm],
              [6, 35])
    np.testing.assert_array_equal(mx, a.max(axis=0))
    np.testing.assert_allclose(sm, a.sum(axis=0), rtol=1e-5)
    assert "omp simd" not in src


def test_aligned_access_only_where_proven(run, rng):
    """T is a 64-byte-aligned temporary of 4 x 32 floats: rows start on a vector boundary;
    A is an argument (alignment unknown) and T at column 1 is off by one element."""
    A, Y = buf("A", (4, 33), F32), buf("Y", (4, 32), F32, OUT)
    T = buf("T", (4, 32), F32, TEMP)
    fill = loop("i", 4, loop("j", 32, Store("T", (i, j), A[i, j] * 2.0), V))
    use = loop("i", 4, loop("j", 31, Store("Y", (i, j), T[i, j + 1] + A[i, j + 1]), V))
    last = loop("i", 4, Store("Y", (i, c(31, I64)), c(0.0, F32)))
    kernel = Kernel("align", (A, Y), (), (T,), Block((fill, use, last)))
    a, y = data(rng, (4, 33), "float32"), poison((4, 32), "float32")
    src = run(kernel, [a, y])
    want = np.concatenate([a[:, 1:32] * 3, np.zeros((4, 1), "float32")], axis=1)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    lanes = HOST.vector_bytes // 4
    if 32 % lanes == 0:
        assert re.search(r"pl_store_aligned_v\d+f\(&T\[i\]\[j\]", src)
    assert re.search(r"pl_load_v\d+f\(&T\[i\]\[j \+ 1\]\)", src)
    assert re.search(r"pl_load_v\d+f\(&A\[i\]\[j\]\)", src)


def test_plan_proves_alignment_from_affine_offsets():
    T = buf("T", (6, 64), F32, TEMP)
    i1, j1 = Var("i_1"), Var("j_1")
    vec = loop("j_2", 16, Store("T", (i1, j1 * 16 + Var("j_2")), c(0.0, F32)), V)
    assert proven_aligned((i1, j1 * 16 + Var("j_2")), T, vec, 16)
    assert not proven_aligned((i1, j1 * 8 + Var("j_2")), T, vec, 16)
    assert not proven_aligned((i1, Var("j_2") + 1), T, vec, 16)
    G = buf("G", (6, 64), F32)   # an argument: NumPy's alignment is not ours to assume
    assert not proven_aligned((i1, j1 * 16 + Var("j_2")), G, vec, 16)
    plan = plan_vector_loop(vec, {"T": T}, AVX512)
    assert isinstance(plan, VectorPlan) and plan.lanes == 16 and plan.epilogue is Epilogue.NONE


def test_lanes_follow_the_widest_type_and_short_constant_loops():
    assert choose_lanes({F32}, AVX512, None) == 16
    assert choose_lanes({F32, F64}, AVX512, None) == 8
    assert choose_lanes({F32}, AVX2, None) == 8
    assert choose_lanes({F32}, AVX512, 5) == 8
    assert choose_lanes({F32}, AVX512, 1) == 4


def test_a_store_at_the_same_element_is_not_vectorized():
    S, A = buf("S", (1,), F32, OUT), buf("A", (n,), F32)
    body = loop("j", n, Store("S", (c(0, I64),), A[j]), V)
    plan = plan_vector_loop(body, {"S": S, "A": A}, AVX512)
    assert isinstance(plan, NotVectorized) and "same element" in plan.reason


def test_local_scope_temporary_of_the_register_tile(run, rng):
    """A 2 x 16 local tile updated with broadcasts of A (as cache_write "local" makes it)."""
    A, B, C = buf("A", (2, m), F32), buf("B", (m, 16), F32), buf("C", (2, 16), F32, OUT)
    Tl = buf("Tl", (2, 16), F32, TEMP, MemScope.LOCAL)
    i1 = Var("i_1")
    body = loop("o", 1, Block((
        loop("i_1", 2, loop("j", 16, Store("Tl", (i1, j), c(0.0, F32)), V)),
        loop("k", m, loop("i_1", 2, loop("j", 16, Store("Tl", (i1, j), A[i1, k] * B[k, j],
                                                         ReduceKind.SUM), V))),
        loop("i_1", 2, loop("j", 16, Store("C", (i1, j), Tl[i1, j]), V)))))
    a, b, out = data(rng, (2, 9), "float32"), data(rng, (9, 16), "float32"), poison((2, 16),
                                                                                 "float32")
    src = run(Kernel("tile", (A, B, C), ("m",), (Tl,), body), [a, b, out], [9])
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
    if HOST.name == "avx512":
        assert "pl_load_aligned_v16f(&Tl[i_1][j])" in src


@pytest.mark.skipif(HOST.name != "avx512", reason="the register tile is sized for AVX-512")
def test_demo_register_tile_is_vector_fmas(tmp_path):
    """The demo's matmul + ReLU schedule (cache_write local, unroll, vectorize j2 = 16): the
    C tile is updated with broadcasts of A and aligned vector loads of packed B, and gcc turns
    the unrolled update into 24 vector FMAs on zmm registers."""
    import subprocess

    import polyloop as pl
    from polyloop import ops
    from polyloop.cli.demo import matmul_relu
    sch = ops.schedule_matmul_relu(matmul_relu(192), lanes=16, pack_in_panel=False)
    src = pl.build(sch).source  # 6 and 64 divide 192
    assert "typedef float v16f __attribute__((vector_size(64)));" in src
    assert "const v16f pl_bc0 = pl_broadcast_v16f(A[6 * i_0 + i_1][k]);" in src
    assert "pl_load_aligned_v16f(&B_packed[j_0][k][16 * j_1 + j_2])" in src
    (tmp_path / "demo.c").write_text(src)
    subprocess.run([CONFIG.cc, "-O3", "-march=native", "-fopenmp", "-std=gnu11", "-S",
                    str(tmp_path / "demo.c"), "-o", str(tmp_path / "demo.s")], check=True)
    asm = (tmp_path / "demo.s").read_text()
    assert len(re.findall(r"vfmadd\d+ps\s+%zmm\d+, %zmm\d+, %zmm\d+", asm)) >= 24


def padded_copy_kernel() -> Kernel:
    """P[i, j] = X[i - 1, j - 1] inside the image, 0 on a border of 1: a condition on the
    lanes' index guards a load that would be out of bounds at j = 0 and j = n + 1."""
    X, P = buf("X", (m, n), F32), buf("P", (m + 2, n + 2), F32, OUT)
    inside = (i >= 1) & (i < m + 1) & (j >= 1) & (j < n + 1)
    body = Store("P", (i, j), select(inside, X[i - 1, j - 1], c(0.0, F32)))
    return Kernel("pad", (X, P), ("m", "n"), (), loop("i", m + 2, loop("j", n + 2, body, V)))


def test_index_conditions_guard_loads_with_lane_masks(build, rng):
    call, src = build(padded_copy_kernel())
    for rows, cols in [(1, 1), (3, 14), (2, 15), (4, 31), (2, 47)]:
        x, p = data(rng, (rows, cols), "float32"), poison((rows + 2, cols + 2), "float32")
        call([x, p], [rows, cols])
        np.testing.assert_array_equal(p, np.pad(x, 1))
    if masked_epilogue_available(HOST, {F32}, HOST.vector_bytes // 4):
        # AVX-512: the lane conditions become a scalar bit mask (a mask register), not vectors
        assert "pl_load_where_bits_v16f(&X[i - 1][j - 1], pl_k0)" in src
        assert "pl_lanes_below_v16i(-(j - 1))" in src and "pl_iota" not in src
    else:
        assert "AVX-512 masked loads" in src


@pytest.mark.parametrize("cond", ["eq", "ne", "mirrored", "step2"])
def test_every_kind_of_lane_condition(build, rng, cond):
    """Bit masks for steps 1 and -1 (every comparison), vector masks for other steps."""
    A, Y = buf("A", (n,), F32), buf("Y", (n,), F32, OUT)
    test = {"eq": binop(BinOpKind.EQ, j, n - 20), "ne": binop(BinOpKind.NE, j + 3, n - 1),
            "mirrored": binop(BinOpKind.LE, n - j, c(9, I64)) | (j < 2),
            "step2": j * 2 >= n - 7}[cond]
    body = Store("Y", (j,), select(test, A[j] * 2.0, c(-1.0, F32)))
    call, src = build(Kernel("lanes", (A, Y), ("n",), (), loop("j", n, body, V)))
    for size in (1, 15, 17, 40):
        a, y = data(rng, size, "float32"), poison((size,), "float32")
        call([a, y], [size])
        jj = np.arange(size)
        want = {"eq": jj == size - 20, "ne": jj + 3 != size - 1,
                "mirrored": (size - jj <= 9) | (jj < 2), "step2": jj * 2 >= size - 7}[cond]
        np.testing.assert_array_equal(y, np.where(want, a * 2, -1))
    if HOST.name == "avx512":
        assert ("pl_select_bits" in src) == (cond != "step2")


def test_guarded_loads_need_avx512_masks_elsewhere():
    kernel = padded_copy_kernel()
    buffers = {b.name: b for b in kernel.args}
    inner = kernel.body.body  # type: ignore[attr-defined]
    avx2 = plan_vector_loop(inner, buffers, AVX2)
    assert isinstance(avx2, NotVectorized) and "needs AVX-512 masked loads" in avx2.reason
    avx512 = plan_vector_loop(inner, buffers, AVX512)
    assert isinstance(avx512, VectorPlan) and len(avx512.guarded) == 1


def test_a_load_read_also_unconditionally_needs_no_mask(build, rng):
    """where(A[j] > 0, A[j], 0.5 * B[j]) reads B[j] only where A[j] <= 0: B is masked, A not."""
    A, B, Y = buf("A", (n,), F32), buf("B", (n,), F32), buf("Y", (n,), F32, OUT)
    body = Store("Y", (j,), select(A[j] > 0.0, A[j], B[j] * 0.5))
    call, src = build(Kernel("relu_or", (A, B, Y), ("n",), (), loop("j", n, body, V)))
    a, b, y = data(rng, 37, "float32"), data(rng, 37, "float32"), poison((37,), "float32")
    call([a, b, y], [37])
    np.testing.assert_array_equal(y, np.where(a > 0, a, b * np.float32(0.5)))
    if HOST.name == "avx512":
        assert "pl_load_where_v16f(&B[j]" in src and "pl_load_where_v16f(&A[j]" not in src


def test_an_invariant_load_under_a_lane_condition_is_not_hoisted():
    A, Y = buf("A", (n,), F32), buf("Y", (n,), F32, OUT)
    inner = loop("j", n, Store("Y", (j,), select(j > 3, A[i], c(0.0, F32))), V)
    plan = plan_vector_loop(inner, {"A": A, "Y": Y}, AVX512)
    assert isinstance(plan, NotVectorized) and "would read it before the loop" in plan.reason
