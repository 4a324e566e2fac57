# SPDX-License-Identifier: Apache-2.0
"""The ``nontemporal`` annotation: whole-vector stores of the named buffers become streaming
stores, peeled at run time to a vector boundary where alignment is not proven, with an sfence
after the streamed nest; results equal NumPy at odd row lengths and misaligned arrays."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen import generate_c
from polyloop.config import CONFIG
from polyloop.ir.expr import Var
from polyloop.ir.loops import Block, Kernel, LoopKind, Store
from polyloop.util.isa import classify, host_isa

from .irbuild import F32, F64, I32, I64, OUT, TEMP, buf, c, loop, param, poison

n, m = param("n"), param("m")
i, j = Var("i"), Var("j")
V, P = LoopKind.VECTORIZED, LoopKind.PARALLEL
HOST = host_isa(CONFIG.cc)
AVX2 = classify(frozenset({"__AVX2__", "__AVX__", "__FMA__", "__SSE2__"}))
NEON = classify(frozenset({"__ARM_NEON"}))
NP = {F32: "float32", F64: "float64", I32: "int32", I64: "int64"}
NT = (("nontemporal", "Y"),)

needs_avx = pytest.mark.skipif(not HOST.has("__AVX__"), reason="the host has no AVX")


def misaligned(shape: tuple[int, ...], dtype: str, offset: int) -> np.ndarray:
    """A C-contiguous poisoned array that starts ``offset`` elements after a 64-byte boundary
    (``offset`` may be a fraction of an element: then it is not aligned to its element)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(size + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + int(offset * np.dtype(dtype).itemsize)
    a = raw[start:start + size].view(dtype).reshape(shape)
    a[...] = poison(shape, dtype)
    return a


def rows_kernel(rows, cols, dtype=F32, kind=P, annotations=NT) -> Kernel:
    """Y[i, j] = A[i, j] * 3 + 1 over rows in parallel, the row vectorized, Y streamed."""
    A, Y = buf("A", (rows, cols), dtype), buf("Y", (rows, cols), dtype, OUT)
    body = loop("j", cols, Store("Y", (i, j), A[i, j] * c(3, dtype) + c(1, dtype)), V)
    params = tuple(p.name for p in (rows, cols) if isinstance(p, Var))
    return Kernel("rows", (A, Y), params, (), loop("i", rows, body, kind,
                                                       annotations=annotations))


def check_rows(call, rng, rows, cols, dtype, offset, params) -> None:
    a = rng.integers(-100, 100, (rows, cols)).astype(dtype)
    y = misaligned((rows, cols), dtype, offset)
    call([a, y], params)
    np.testing.assert_array_equal(y, a * 3 + 1)


@needs_avx
@pytest.mark.parametrize("isa", [None, AVX2], ids=["host", "avx2"])
def test_rows_of_every_length_and_misalignment(build, rng, isa):
    call, src = build(rows_kernel(n, m), isa)
    lanes = (isa or HOST).vector_bytes // 4
    for cols in (1, lanes - 1, lanes, lanes + 1, 2 * lanes + 3, 97):
        for offset in (0, 1, lanes - 1, 0.5):   # 0.5: not aligned to its element
            check_rows(call, rng, 3, cols, "float32", offset, [3, cols])
    assert re.search(rf"pl_store_stream_v{lanes}f\(&Y\[i\]\[j\]", src)
    assert "pl_align_gap" in src
    # the fence ends each iteration of the parallel loop: inside the region
    assert re.search(r"pl_store_stream.*\n(.*\n){0,12}\s*_mm_sfence\(\);\n    }\n", src)


@needs_avx
@pytest.mark.parametrize("dtype", [F32, F64, I32, I64], ids=NP.get)
def test_every_vector_dtype_streams(build, rng, dtype):
    call, src = build(rows_kernel(n, m, dtype))
    for cols in (5, 37):
        check_rows(call, rng, 2, cols, NP[dtype], 1, [2, cols])
    assert "pl_store_stream_" in src


@needs_avx
@pytest.mark.parametrize("cols", [32, 64, 19])
def test_constant_rows_are_peeled_too(build, rng, cols):
    """A constant row of whole vectors needs a remainder once its head is peeled off."""
    call, src = build(rows_kernel(c(3, I64), c(cols, I64)))
    for offset in (0, 3):
        check_rows(call, rng, 3, cols, "float32", offset, [])
    assert "pl_store_stream_" in src


@needs_avx
def test_serial_annotated_loop_fences_once_after_it(build, rng):
    call, src = build(rows_kernel(n, m, kind=LoopKind.SERIAL))
    check_rows(call, rng, 4, 40, "float32", 2, [4, 40])
    assert src.count("_mm_sfence();") == 1
    assert re.search(r"\n    }\n    _mm_sfence\(\);", src)   # after the i loop closes


@needs_avx
def test_proven_aligned_temporary_streams_without_a_peel(build, rng):
    A, Y, T = buf("A", (4, 64), F32), buf("Y", (4, 64), F32, OUT), buf("T", (4, 64), F32, TEMP)
    fill = loop("i", 4, loop("j", 64, Store("T", (i, j), A[i, j] + 1.0), V),
                annotations=(("nontemporal", "T"),))
    use = loop("i", 4, loop("j", 64, Store("Y", (i, j), T[i, j] * 2.0), V))
    call, src = build(Kernel("temp", (A, Y), (), (T,), Block((fill, use))))
    a, y = rng.standard_normal((4, 64)).astype("float32"), poison((4, 64), "float32")
    call([a, y])
    np.testing.assert_allclose(y, (a + 1) * 2, rtol=1e-6)
    assert re.search(r"pl_store_stream_v\d+f\(&T\[i\]\[j\]", src) and "pl_align_gap" not in src


@needs_avx
def test_a_split_off_vector_stays_ordinary_and_says_why(build, rng):
    lanes = HOST.vector_bytes // 4
    A, Y = buf("A", (3, 4 * lanes), F32), buf("Y", (3, 4 * lanes), F32, OUT)
    j0, j1 = Var("j_0"), Var("j_1")
    at = (i, j0 * lanes + j1)
    inner = loop("j_0", 4, loop("j_1", lanes, Store("Y", at, A[at] * 2.0), V))
    call, src = build(Kernel("split", (A, Y), (), (), loop("i", 3, inner, annotations=NT)))
    a, y = rng.standard_normal((3, 4 * lanes)).astype("float32"), misaligned((3, 4 * lanes),
                                                                              "float32", 1)
    call([a, y])
    np.testing.assert_allclose(y, a * 2)
    assert "pl_store_stream" not in src and "_mm_sfence" not in src
    assert "one vector of unknown alignment; vectorize the whole row" in src
    assert "nontemporal Y: no streaming store under loop i" in src


def test_strided_stores_and_other_isas_stay_ordinary(build, rng):
    A, Y = buf("A", (n, 2 * n), F32), buf("Y", (n, 2 * n), F32, OUT)
    body = loop("j", n, Store("Y", (i, j * 2), A[i, j * 2] + 1.0), V)
    kernel = Kernel("strided", (A, Y), ("n",), (), loop("i", n, body, annotations=NT))
    call, src = build(kernel)
    a, y = rng.standard_normal((5, 10)).astype("float32"), poison((5, 10), "float32")
    call([a, y], [5])
    np.testing.assert_allclose(y[:, ::2], a[:, ::2] + 1)
    assert "pl_store_stream" not in src and "no streaming store under loop i" in src
    neon = generate_c(rows_kernel(n, m), isa=NEON)
    assert "pl_store_stream" not in neon and "neon has no streaming store" in neon


@needs_avx
def test_schedule_annotation_end_to_end(rng):
    rows, cols = pl.var("rows"), pl.var("cols")
    A = pl.placeholder((rows, cols), name="A")
    B = pl.compute((rows, cols), lambda r, s: A[r, s] * 2.0 - 1.0, name="B")
    sch = pl.Schedule(B)
    r, s = sch.get_loops("B")
    sch.parallel(r)
    sch.vectorize(s)
    sch.annotate(r, "nontemporal", "B")
    mod = pl.build(sch)
    assert "pl_store_stream" in mod.source
    for shape in [(1, 1), (3, 15), (2, 17), (5, 100)]:
        a = rng.standard_normal(shape).astype("float32")
        y = misaligned(shape, "float32", 1)
        mod(a, y)
        np.testing.assert_allclose(y, a * 2 - 1, rtol=1e-6)


@pytest.mark.parametrize("value", ["C", "A", "", "B, C"])
def test_unknown_or_input_buffers_are_refused(value):
    A = pl.placeholder((4, 8), name="A")
    B = pl.compute((4, 8), lambda r, s: A[r, s] * 2.0, name="B")
    sch = pl.Schedule(B)
    with pytest.raises(pl.ScheduleError, match="annotate 'nontemporal'"):
        sch.annotate(sch.get_loops("B")[0], "nontemporal", value)
