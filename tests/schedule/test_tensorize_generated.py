# SPDX-License-Identifier: Apache-2.0
"""TensorIntrin implemented by a polyloop schedule: the generated function, its check against
the description, axes of extent 1, and replaying tensorize traces by intrinsic name."""
from __future__ import annotations

import doctest
import json
import subprocess
import sys

import numpy as np
import pytest

import polyloop as pl
from polyloop.errors import ArgumentError, ScheduleError
from polyloop.schedule import intrin_registry, tensorize as tz
from seed_kernels import check_matvec, tensorized_matvec  # tests/ is on sys.path

ROWS, COLS = 4, 16


def tile_description(rows=ROWS, cols=COLS, *, op="mul", a_first_k=False):
    """``c[i, j] += a[i, k] * b[k, j]`` over a rows x cols tile and kc steps of k."""
    kc = pl.var("kc")
    a = pl.placeholder((kc, rows) if a_first_k else (rows, kc), "float32", name="a")
    b = pl.placeholder((kc, cols), "float32", name="b")
    k = pl.reduce_axis((0, kc), name="k")

    def body(i, j):
        x = a[k, i] if a_first_k else a[i, k]
        return pl.sum(x * b[k, j] if op == "mul" else x + b[k, j], axis=k)
    return pl.compute((rows, cols), body, name="c")


def tile_schedule(c):
    """The register-tile update as a polyloop schedule: k outer, i unrolled, j vectorized."""
    impl = pl.Schedule(c)
    i, j, k = impl.get_loops("c")
    impl.reorder(k, i, j)
    impl.unroll(i)
    impl.vectorize(j)
    return impl


def matmul(M, N, K):
    A = pl.placeholder((M, K), "float32", name="A")
    B = pl.placeholder((K, N), "float32", name="B")
    k = pl.reduce_axis((0, K), name="k")
    return pl.compute((M, N), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def tensorized(C, intrin, rows=ROWS, cols=COLS):
    sch = pl.Schedule(C)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    sch.reorder(j0, i0, k, i1, j1)
    sch.decompose_reduction(c, k)
    sch.tensorize(k, intrin)
    return sch


def check_matmul(mod, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, dtype=np.float32)
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def tile():
    c = tile_description()
    return pl.TensorIntrin(c, tile_schedule(c))


def test_generated_function_keeps_the_schedule(tile):
    assert tile.generated and tile.source == ""
    assert tile.name.startswith("pl_gen_c_") and tile.extents == (ROWS, COLS, None)
    src = pl.build(tensorized(matmul(8, 32, 5), tile)).source
    head = (f"static inline void {tile.name}(float *restrict c, const float *restrict a, "
            "const float *restrict b, int64_t c_stride0, int64_t a_stride0, int64_t b_stride0, "
            "int64_t kc)")
    assert head in src
    body = src[src.index(head):src.index("int32_t pl_C_kernel_body")]
    assert "#pragma GCC unroll 4" in body            # i unrolled
    assert "explicit vectors of 16 lanes" in body    # j one vector (AVX-512 host)
    assert "i * c_stride0" in body and "i * a_stride0" in body and "b_stride0" in body
    # sizes divide the tile: one call per tile, strides from isl
    assert f"{tile.name}(&C[4 * i_0][16 * j_0], &A[4 * i_0][0], &B[0][16 * j_0], 32, 5, 32, 5)" in src


# constant sizes below the tile are refused (no full tile: "split it by 4"); the symbolic test
# below runs sizes 1 and tile - 1
@pytest.mark.parametrize("m, n, k", [(4, 16, 1), (5, 17, 9), (7, 31, 2), (8, 33, 16)])
def test_generated_tile_equals_numpy(tile, m, n, k):
    check_matmul(pl.build(tensorized(matmul(m, n, k), tile)), m, n, k, seed=m * 100 + n)


def test_generated_tile_symbolic_sizes(tile):
    mod = pl.build(tensorized(matmul(pl.var("M"), pl.var("N"), pl.var("K")), tile))
    for m, n, k in [(1, 1, 1), (3, 15, 4), (5, 17, 7), (9, 48, 2), (4, 16, 0)]:
        check_matmul(mod, m, n, k, seed=m + n + k)


def test_plain_compute_and_description_itself_are_implementations():
    c = tile_description(2, 8)
    for impl in (c, pl.Schedule(c)):
        it = pl.TensorIntrin(c, impl)
        assert it.generated
        check_matmul(pl.build(tensorized(matmul(5, 17, 3), it, 2, 8)), 5, 17, 3)


def test_same_implementation_same_name_different_schedule_other_name(tile):
    c = tile_description()
    assert pl.TensorIntrin(c, tile_schedule(c)).name == tile.name
    assert pl.TensorIntrin(c, pl.Schedule(c)).name != tile.name


def test_a_differently_named_computation_implements_the_description(tile):
    kc2 = pl.var("depth")
    x = pl.placeholder((ROWS, kc2), "float32", name="x")
    y = pl.placeholder((kc2, COLS), "float32", name="y")
    r = pl.reduce_axis((0, kc2), name="r")
    z = pl.compute((ROWS, COLS), lambda p, q: pl.sum(x[p, r] * y[r, q], axis=r), name="z")
    it = pl.TensorIntrin(tile_description(), z, name="renamed_tile")
    src = pl.build(tensorized(matmul(5, 17, 3), it)).source
    assert ("static inline void renamed_tile(float *restrict z, const float *restrict x, "
            "const float *restrict y, int64_t z_stride0, int64_t x_stride0, "
            "int64_t y_stride0, int64_t depth)") in src
    check_matmul(pl.build(tensorized(matmul(5, 17, 3), it)), 5, 17, 3)


@pytest.mark.parametrize("impl, says", [
    (lambda: tile_description(op="add"), "body operator differs"),
    (lambda: tile_description(ROWS, 8), "extent differs"),
    (lambda: tile_description(a_first_k=True), "does not index its buffer by the axes"),
])
def test_a_mismatching_implementation_is_refused(impl, says):
    with pytest.raises(ArgumentError, match="does not compute the description") as e:
        pl.TensorIntrin(tile_description(), impl())
    assert says in str(e.value)


def test_other_refusals():
    c = tile_description()
    with pytest.raises(ArgumentError, match="implementation must be C source"):
        pl.TensorIntrin(c, 42)
    n = pl.var("n")
    kc = pl.var("kc")
    a = pl.placeholder((ROWS, n), "float32", name="a")
    b = pl.placeholder((kc, COLS), "float32", name="b")
    k = pl.reduce_axis((0, kc), name="k")
    wide = pl.compute((ROWS, COLS), lambda i, j: pl.sum(a[i, k] * b[k, j], axis=k), name="c")
    with pytest.raises(ArgumentError, match="size parameter.*n.*bound no axis"):
        pl.TensorIntrin(c, wide)
    cached = pl.Schedule(c)
    cached.cache_write("c", "local")
    with pytest.raises(ArgumentError, match="accumulate into the output directly"):
        pl.TensorIntrin(c, cached)


def test_generated_dot_product_on_a_matrix_vector_product():
    kc = pl.var("kc")
    x = pl.placeholder((kc,), "float32", name="x")
    y = pl.placeholder((kc,), "float32", name="y")
    k = pl.reduce_axis((0, kc), name="k")
    d = pl.compute((), lambda: pl.sum(x[k] * y[k], axis=k), name="d")
    impl = pl.Schedule(d)
    k0, k1 = impl.split(impl.get_loops("d")[0], [None, 4])
    impl.unroll(k1)
    mod = pl.build(tensorized_matvec(pl.TensorIntrin(d, impl)))
    assert "d[0]" in mod.source
    check_matvec(mod, [(1, 1), (3, 3), (2, 5), (7, 33)], seed=3)


# --- axes of extent 1 -------------------------------------------------------------------------

ROW_SOURCE = """static inline void row_1x8(float *c, const float *a, const float *b,
                           int64_t ldc, int64_t lda, int64_t ldb, int64_t kc) {
    for (int64_t k = 0; k < kc; k++)
        for (int j = 0; j < 8; j++)
            c[j] += a[k] * b[k * ldb + j];
}"""


@pytest.mark.parametrize("generated", [False, True])
@pytest.mark.parametrize("m, n, k", [(1, 8, 1), (2, 9, 3), (5, 17, 7)])
def test_an_axis_of_extent_1_gets_the_call(generated, m, n, k):
    c = tile_description(1, 8)
    it = pl.TensorIntrin(c, tile_schedule(c) if generated else ROW_SOURCE)
    sch = tensorized(matmul(m, n, k), it, 1, 8)
    mod = pl.build(sch)
    if n >= 8:
        assert f"{it.name}(&C[" in mod.source          # isl wrote no loop for i1
        assert "no full tile" not in mod.source
    check_matmul(mod, m, n, k, seed=m + n)


# --- replaying tensorize by name --------------------------------------------------------------

def _replayed_in_a_fresh_process(script: str) -> str:
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_builtin_micro_kernel_replays_in_a_fresh_process():
    from polyloop.intrin import gemm_intrin
    sch = tensorized(matmul(7, 19, 5), gemm_intrin("portable", rows=4, cols=8), 4, 8)
    trace = sch.trace.to_json()
    script = f"""
import json, numpy as np, polyloop as pl
from polyloop.schedule import intrin_registry, tensorize as tz
assert not any(k.startswith("pl_ukr_") for k in intrin_registry._REGISTRY)
A = pl.placeholder((7, 5), "float32", name="A")
B = pl.placeholder((5, 19), "float32", name="B")
k = pl.reduce_axis((0, 5), name="k")
C = pl.compute((7, 19), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
sch = pl.Schedule.from_trace(C, {trace!r})
mod = pl.build(sch)
rng = np.random.default_rng(0)
a = rng.random((7, 5), dtype=np.float32); b = rng.random((5, 19), dtype=np.float32)
out = np.full((7, 19), np.nan, np.float32); mod(a, b, out)
print(json.dumps([bool(np.allclose(out, a @ b, rtol=1e-5)), "pl_ukr_gemm_portable_4x8(" in mod.source]))
"""
    assert json.loads(_replayed_in_a_fresh_process(script).strip()) == [True, True]


def test_generated_intrinsic_has_the_same_name_in_another_process(tile):
    script = """
import polyloop as pl
kc = pl.var("kc")
a = pl.placeholder((4, kc), "float32", name="a")
b = pl.placeholder((kc, 16), "float32", name="b")
k = pl.reduce_axis((0, kc), name="k")
c = pl.compute((4, 16), lambda i, j: pl.sum(a[i, k] * b[k, j], axis=k), name="c")
impl = pl.Schedule(c)
i, j, kk = impl.get_loops("c")
impl.reorder(kk, i, j); impl.unroll(i); impl.vectorize(j)
print(pl.TensorIntrin(c, impl).name)
"""
    assert _replayed_in_a_fresh_process(script).strip() == tile.name


def test_replay_with_the_registry_cleared(monkeypatch, tile):
    from polyloop.intrin import gemm_intrin
    builtin = tensorized(matmul(6, 16, 3), gemm_intrin("portable", rows=4, cols=8), 4, 8)
    mine = tensorized(matmul(6, 16, 3), tile)
    monkeypatch.setattr(intrin_registry, "_REGISTRY", {})
    again = pl.Schedule.from_trace(matmul(6, 16, 3), builtin.trace.to_json())
    check_matmul(pl.build(again), 6, 16, 3)
    with pytest.raises(ScheduleError, match=f"unknown intrinsic '{tile.name}'.*create the "
                                            "intrinsic again"):
        pl.Schedule.from_trace(matmul(6, 16, 3), mine.trace.to_json())
    c = tile_description()
    pl.TensorIntrin(c, tile_schedule(c))             # created again: the same name
    check_matmul(pl.build(pl.Schedule.from_trace(matmul(6, 16, 3), mine.trace.to_json())),
                 6, 16, 3)
    with pytest.raises(ScheduleError, match="names no built-in micro-kernel"):
        tz.lookup("pl_ukr_gemm_portable_5x5")


# --- docstring examples -----------------------------------------------------------------------

@pytest.mark.parametrize("module", ["polyloop.schedule.intrin_registry", "polyloop.schedule.intrin_body",
                                    "polyloop.lower.function", "polyloop.intrin"])
def test_docstring_examples(module):
    import importlib
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
