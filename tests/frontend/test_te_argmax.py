# SPDX-License-Identifier: Apache-2.0
"""Reductions over tuples: ``pl.argmax`` / ``pl.argmin`` and TVM-style ``pl.comm_reducer`` with
``(index, value)`` pairs, against ``np.argmax`` / ``np.argmin``, on C and OpenCL."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.testing.interpret import interpret

m, n = pl.var("m"), pl.var("n")


def _arg(reducer, dtype, start=0):
    A = pl.placeholder((m, n), dtype, name="A")
    k = pl.reduce_axis((start, n), name="k")
    return pl.compute((m,), lambda i: reducer(A[i, k], axis=k), name="T")


def _data(rng, dtype, shape=(13, 11)):
    """Random rows with ties, a row of equal values, and (for floats) NaN and infinite rows."""
    if np.dtype(dtype).kind == "f":
        a = rng.uniform(-4, 4, shape).round(0).astype(dtype)   # rounding makes many ties
        a[1, 3] = a[1, -2] = np.nan
        a[2, :] = -np.inf
        a[3, :] = np.inf
        a[4, :] = np.nan
        a[5, 6] = np.inf
    else:
        info = np.iinfo(dtype)
        a = rng.integers(-3, 4, shape).astype(dtype)
        a[2, :] = info.min
        a[3, :] = info.max
    a[0, :] = a[0, 0]
    return a


def _run(mod, a, out_dtype):
    """Outputs passed in poisoned, so an element never written shows."""
    idx = np.full(a.shape[0], -7, np.int64)
    val = np.full(a.shape[0], np.nan if np.dtype(out_dtype).kind == "f" else 99, out_dtype)
    mod(a, idx, val)
    return idx, val


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32"])
def test_argmax_and_argmin_match_numpy_with_ties_nan_and_infinities(dtype, rng):
    idx, val = _arg(pl.argmax, dtype)
    lo_idx, lo_val = _arg(pl.argmin, dtype)
    assert idx.dtype is pl.DType.INT64 and str(val.dtype) == dtype
    mod_max, mod_min = pl.build(pl.Schedule(idx, val)), pl.build(pl.Schedule(lo_idx, lo_val))
    a = _data(rng, dtype)
    got_i, got_v = _run(mod_max, a, dtype)
    np.testing.assert_array_equal(got_i, np.argmax(a, axis=1))
    np.testing.assert_array_equal(got_v, np.max(a, axis=1))
    got_i, got_v = _run(mod_min, a, dtype)
    np.testing.assert_array_equal(got_i, np.argmin(a, axis=1))
    np.testing.assert_array_equal(got_v, np.min(a, axis=1))


def test_index_counts_from_the_start_of_the_reduce_axis(rng):
    idx, val = _arg(pl.argmax, "float32", start=3)
    a = _data(rng, "float32", (6, 10))
    got_i, got_v = _run(pl.build(pl.Schedule([idx, val])), a, "float32")
    np.testing.assert_array_equal(got_i, np.argmax(a[:, 3:], axis=1))
    np.testing.assert_array_equal(got_v, np.max(a[:, 3:], axis=1))


def test_reference_interpreter_agrees(rng):
    idx, val = _arg(pl.argmin, "float64")
    a = _data(rng, "float64", (7, 7))
    got_i, got_v = interpret(pl.to_program(idx, val), a)
    np.testing.assert_array_equal(got_i, np.argmin(a, axis=1))
    np.testing.assert_array_equal(got_v, np.min(a, axis=1))


def _tvm_argmax():
    """TVM's tutorial argmax: keep the accumulated pair unless the new value is larger."""
    def combine(x, y):
        keep = x[1] >= y[1]
        return pl.where(keep, x[0], y[0]), pl.where(keep, x[1], y[1])

    def identity(t0, t1):
        return pl.const(-1, t0), pl.min_value(t1)
    return pl.comm_reducer(combine, identity, name="argmax")


def test_tvm_style_comm_reducer_over_index_value_pairs(rng):
    argmax = _tvm_argmax()
    idx = pl.placeholder((m, n), "int32", name="idx")
    val = pl.placeholder((m, n), "int32", name="val")
    k = pl.reduce_axis((0, n), name="k")
    T0, T1 = pl.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    assert (T0.dtype, T1.dtype) == (pl.DType.INT32, pl.DType.INT32)
    sch = pl.Schedule(T0, T1)
    i, _ = sch.get_loops(sch.get_block("T"))
    io, ii = sch.split(i, factor=4)
    sch.parallel(io)
    v = rng.integers(-5, 5, (10, 9)).astype("int32")
    ix = rng.permutation(90).reshape(10, 9).astype("int32")
    got0, got1 = np.full(10, -7, "int32"), np.full(10, -7, "int32")
    pl.build(sch)(ix, v, got0, got1)
    first = np.argmax(v, axis=1)          # ties keep the accumulated (first) pair
    np.testing.assert_array_equal(got0, ix[np.arange(10), first])
    np.testing.assert_array_equal(got1, v.max(axis=1))


def test_schedules_on_the_spatial_axis_keep_the_result(rng):
    idx, val = _arg(pl.argmax, "float32")
    sch = pl.Schedule(idx, val)
    i, k = sch.get_loops(sch.get_block("T"))
    sch.reorder(k, i)                       # each row still sees k in order
    io, ii = sch.split(i, factors=[None, 8])
    sch.vectorize(ii)
    text = str(sch)
    assert text.index("for k in") < text.index("for i_0 in")
    a = _data(rng, "float32", (21, 10))
    got_i, got_v = _run(pl.build(sch), a, "float32")
    np.testing.assert_array_equal(got_i, np.argmax(a, axis=1))
    np.testing.assert_array_equal(got_v, np.max(a, axis=1))


def test_reordering_the_reduction_is_refused_with_the_dependence():
    idx, val = _arg(pl.argmax, "float32")
    sch = pl.Schedule(idx, val)
    i, k = sch.get_loops(sch.get_block("T"))
    ko, ki = sch.split(k, factor=4)
    before = str(sch)
    with pytest.raises(pl.ScheduleError, match=r"RAW dependence .* on buffer T"):
        sch.reorder(ki, ko)
    with pytest.raises(pl.ScheduleError, match=r"parallelize loop 'k_0'.*dependence"):
        sch.parallel(ko)
    with pytest.raises(pl.ScheduleError):
        sch.rfactor(ki, 0)
    assert str(sch) == before


def test_argmax_on_opencl(rng):
    pytest.importorskip("pyopencl", reason="the OpenCL target needs pyopencl")
    idx, val = _arg(pl.argmax, "float32")
    mod = pl.build(pl.Schedule(idx, val), target="opencl")
    a = _data(rng, "float32", (70, 9))
    got_i, got_v = _run(mod, a, "float32")
    np.testing.assert_array_equal(got_i, np.argmax(a, axis=1))
    np.testing.assert_array_equal(got_v, np.max(a, axis=1))


def test_an_argmax_over_a_whole_vector_is_a_scalar(rng):
    A = pl.placeholder((n,), "float64", name="A")
    k = pl.reduce_axis((0, n), name="k")
    idx, val = pl.compute((), lambda: pl.argmax(A[k], axis=k), name="best")
    a = rng.standard_normal(17)
    got_i, got_v = pl.build(pl.Schedule(idx, val))(a)
    assert int(got_i) == np.argmax(a) and float(got_v) == a.max()


def test_updates_that_read_each_other_are_refused():
    swap = pl.comm_reducer(lambda x, y: (x[1] + y[0], x[0] + y[1]),
                           lambda t0, t1: (pl.const(0, t0), pl.const(0, t1)), name="swap")
    A = pl.placeholder((4, 5), "float32", name="A")
    k = pl.reduce_axis((0, 5), name="k")
    with pytest.raises(pl.PolyloopError, match=r"reducer 'swap'.*each read another's"):
        pl.compute((4,), lambda i: swap((A[i, k], A[i, k]), axis=k), name="S")


def test_reducer_mistakes_name_the_reducer():
    A = pl.placeholder((4, 5), "float32", name="A")
    k = pl.reduce_axis((0, 5), name="k")
    three = pl.comm_reducer(lambda x, y: (x[0],), lambda t0, t1: (0, 0), name="short")
    with pytest.raises(pl.PolyloopError, match=r"reducer 'short'.*tuple of 2 values"):
        pl.compute((4,), lambda i: three((k, A[i, k]), axis=k))
    loaded = pl.comm_reducer(lambda x, y: (y[0], y[1]), lambda t0, t1: (A[0, 0], A[0, 0]),
                             name="loaded")
    with pytest.raises(pl.PolyloopError, match=r"reducer 'loaded'.*not a constant"):
        pl.compute((4,), lambda i: loaded((k, A[i, k]), axis=k))
    with pytest.raises(pl.PolyloopError, match=r"pl.argmax\(\.\.\., axis=\) takes one reduce axis"):
        pl.compute((4,), lambda i: pl.argmax(A[i, k], axis=[k, k]))
