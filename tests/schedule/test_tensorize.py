# SPDX-License-Identifier: Apache-2.0
"""Schedule.tensorize: the structural match, full/partial tiles, the trace, the targets."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import polyloop as pl
from polyloop.errors import BuildError, ScheduleError
from polyloop.ir.expr import Load

REF_SOURCE = """static inline void ref_gemm_4x8(float *c, const float *a, const float *b,
                                int64_t ldc, int64_t lda, int64_t ldb, int64_t kc) {
    for (int64_t k = 0; k < kc; k++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 8; j++)
                c[i * ldc + j] += a[i * lda + k] * b[k * ldb + j];
}"""


def ref_intrin() -> pl.TensorIntrin:
    """A 4 x 8 x kc matmul update, written in plain C."""
    kc = pl.var("kc")
    a = pl.placeholder((4, kc), "float32", name="a")
    b = pl.placeholder((kc, 8), "float32", name="b")
    r = pl.reduce_axis((0, kc), name="r")
    c = pl.compute((4, 8), lambda i, j: pl.sum(a[i, r] * b[r, j], axis=r), name="c")
    return pl.TensorIntrin(c, REF_SOURCE)


def matmul(sizes=None):
    M, N, K = sizes or (pl.var("M"), pl.var("N"), pl.var("K"))
    A = pl.placeholder((M, K), "float32", name="A")
    B = pl.placeholder((K, N), "float32", name="B")
    k = pl.reduce_axis((0, K), name="k")
    return pl.compute((M, N), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def tiled(C, ti=4, tj=8, *, pack=True):
    """(j0, i0, k, i1, j1) with the init moved out, B packed in panels of tj columns."""
    sch = pl.Schedule(C)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    if pack:
        sch.transform_layout("C", "B", lambda k, j: (j // tj, k, j % tj))
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    sch.reorder(j0, i0, k, i1, j1)
    sch.decompose_reduction(c, k)
    return sch, k


def check(mod, m, n, k, rng):
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    out = np.full((m, n), np.nan, dtype=np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_description_facts():
    g = ref_intrin()
    assert g.name == "ref_gemm_4x8"
    assert g.axes == ("i", "j", "r") and g.extents == (4, 8, None)
    assert g.operands == ("c", "a", "b")


def test_exact_match_becomes_a_call_with_isl_strides():
    sch, k = tiled(matmul((16, 32, 7)))
    sch.tensorize(k, ref_intrin())
    src = pl.build(sch).source
    assert "static inline void ref_gemm_4x8" in src
    # sizes divide: every tile is full, no test and no loops left for the update
    assert "ref_gemm_4x8(&C[4 * i_0][8 * j_0], &A[4 * i_0][0], &B_packed[j_0][0][0], 32, 7, 8, 7)" in src
    assert "tensorize_fallback" not in src
    check(pl.build(sch), 16, 32, 7, np.random.default_rng(0))


@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (3, 7, 2), (5, 9, 5), (4, 8, 0), (13, 17, 3)])
def test_partial_tiles_run_the_loops(m, n, k):
    """Sizes 1, tile - 1, tile + 1 (symbolic): full tiles call, the others run the loops."""
    sch, kk = tiled(matmul())
    sch.tensorize(kk, ref_intrin())
    mod = pl.build(sch)
    assert "tensorize_fallback: partial tiles" in mod.source
    assert "if (K > 0 && pl_min_i64(4, M - 4 * i_0) == 4" in mod.source
    check(mod, m, n, k, np.random.default_rng(m * 100 + n))


def test_unpacked_b_passes_its_row_stride():
    sch, k = tiled(matmul(), pack=False)
    sch.tensorize(k, ref_intrin())
    mod = pl.build(sch)
    assert "&B[0][8 * j_0], N, K, N, K)" in mod.source
    check(mod, 9, 17, 6, np.random.default_rng(1))


def test_trace_replays_tensorize():
    C = matmul()
    sch, k = tiled(C)
    sch.tensorize(k, ref_intrin())
    assert "sch.tensorize(l4, 'ref_gemm_4x8')" in str(sch.trace)
    again = pl.Schedule.from_trace(C, sch.trace.to_json())
    assert pl.build(again).source == pl.build(sch).source


def test_printed_schedule_shows_the_mark():
    sch, k = tiled(matmul())
    sch.tensorize(k, ref_intrin())
    assert "# tensorize=ref_gemm_4x8" in str(sch)


# --- refused mismatches -------------------------------------------------------------------

def test_wrong_extent_is_refused():
    sch, k = tiled(matmul(), ti=4, tj=16)
    with pytest.raises(ScheduleError, match=r"loop extent differs: loop 'j_1' runs up to 16 "
                                            r"iterations, axis 'j' .* has extent 8"):
        sch.tensorize(k, ref_intrin())


def test_wrong_operator_is_refused():
    M, N, K = pl.var("M"), pl.var("N"), pl.var("K")
    A = pl.placeholder((M, K), "float32", name="A")
    B = pl.placeholder((K, N), "float32", name="B")
    k = pl.reduce_axis((0, K), name="k")
    C = pl.compute((M, N), lambda i, j: pl.sum(A[i, k] + B[k, j], axis=k), name="C")
    sch, kk = tiled(C)
    with pytest.raises(ScheduleError, match="body operator differs"):
        sch.tensorize(kk, ref_intrin())


def test_non_contiguous_operand_is_refused():
    """B read down its columns (B[j, k]): the intrinsic needs B's rows contiguous."""
    M, N, K = pl.var("M"), pl.var("N"), pl.var("K")
    A = pl.placeholder((M, K), "float32", name="A")
    B = pl.placeholder((N, K), "float32", name="B")
    k = pl.reduce_axis((0, K), name="k")
    C = pl.compute((M, N), lambda i, j: pl.sum(A[i, k] * B[j, k], axis=k), name="C")
    sch, kk = tiled(C, pack=False)
    with pytest.raises(ScheduleError, match=r"access stride differs: B\[.*\] moves by K elements "
                                            r"along loop 'j_1'"):
        sch.tensorize(kk, ref_intrin())


def test_wrong_depth_and_imperfect_nests_are_refused():
    sch, k = tiled(matmul())
    i1 = sch.get_loops("C")[3]
    with pytest.raises(ScheduleError, match=r"has 2 loops \(i_1, j_1\), .* has 3 axes"):
        sch.tensorize(i1, ref_intrin())
    sch = pl.Schedule(matmul())
    with pytest.raises(ScheduleError, match="tensorize: unknown intrinsic 'nope'"):
        sch.tensorize(sch.get_loops("C")[0], "nope")


def test_nest_in_another_order_and_overlapping_operands():
    """The intrinsic runs its axes in its own order (checked legal); operands may not alias."""
    n = pl.var("n")
    X = pl.placeholder((n, n), "float32", name="X")
    desc_x = pl.placeholder((4, 8), "float32", name="x")
    desc = pl.compute((4, 8), lambda i, j: desc_x[i, j] * 2.0, name="y")
    src = ("static inline void twice(float *y, const float *x, int64_t ldy, int64_t ldx) {"
           " for (int i = 0; i < 4; i++) for (int j = 0; j < 8; j++)"
           " y[i * ldy + j] = x[i * ldx + j] * 2.0f; }")
    twice = pl.TensorIntrin(desc, src)
    Y = pl.compute((n, n), lambda i, j: X[i, j] * 2.0, name="Y")
    sch = pl.Schedule(Y)
    i, j = sch.get_loops("Y")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, j1, i1)        # the nest runs j before i: fine, no dependence
    sch.tensorize(j1, twice)
    mod = pl.build(sch)
    x = np.random.default_rng(2).random((9, 9), dtype=np.float32)
    np.testing.assert_allclose(mod(x), x * 2)
    # W[i, j] = W[i, j] * 2 in place: both operands of 'twice' would be W
    m = pl.var("m")
    Z = pl.placeholder((m, m), "float32", name="Z")
    p = pl.to_program(pl.compute((m, m), lambda i, j: Z[i, j] * 2.0, name="W"))
    s = p.statements[0]
    value = replace(s.value, lhs=Load("W", s.indices, s.value.lhs.dtype))
    inplace = p.with_statements((replace(s, value=value),))
    sch = pl.Schedule(inplace)
    i, j = sch.get_loops("W")
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    with pytest.raises(ScheduleError, match="reads the buffer it writes"):
        sch.tensorize(i1, twice)


def test_description_errors():
    kc = pl.var("kc")
    a = pl.placeholder((4, kc), "float32", name="a")
    r = pl.reduce_axis((0, kc), name="r")
    c = pl.compute((4,), lambda i: pl.sum(a[i, r] * a[i, r], axis=r), name="c")
    with pytest.raises(pl.ArgumentError, match="accessed twice"):
        pl.TensorIntrin(c, "static inline void f(float *c) {}")
    c = pl.compute((4,), lambda i: pl.sum(a[i, r], axis=r), name="c")
    with pytest.raises(pl.ArgumentError, match="does not define a C function named 'g'"):
        pl.TensorIntrin(c, "static inline void f(float *c) {}", name="g")


def test_other_targets_refuse_the_call():
    sch, k = tiled(matmul())
    sch.tensorize(k, ref_intrin())
    from polyloop.codegen.opencl import generate_opencl
    from polyloop.lower.launches import lower_device
    with pytest.raises(BuildError, match="no opencl implementation; build with target \"c\""):
        generate_opencl(lower_device(sch.program, sch.state.root))
