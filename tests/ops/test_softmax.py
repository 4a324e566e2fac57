# SPDX-License-Identifier: Apache-2.0
"""Row softmax schedule (polyloop.ops.softmax) against NumPy: rows sum to 1 and equal NumPy's.

Column counts around the vector width (1, lanes - 1, lanes + 1, several vectors plus a rest);
outputs are passed in filled with NaN, so an element the kernel forgets to write shows up.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops


def numpy_softmax(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(mod, rng, rows, cols):
    x = (rng.standard_normal((rows, cols)) * 8).astype(np.float32)   # wide range: max matters
    y = np.full((rows, cols), np.nan, dtype=np.float32)
    mod(x, y)
    np.testing.assert_allclose(y, numpy_softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("rows, cols", [(5, 37), (1, 1), (3, 15), (4, 17), (2, 100)])
def test_softmax_default_schedule_matches_numpy(rng, rows, cols):
    X = pl.placeholder((rows, cols), "float32", name="X")
    check(pl.build(ops.schedule_softmax(ops.softmax(X))), rng, rows, cols)


@pytest.mark.parametrize("knobs", [dict(lanes=8), dict(rfactor=False), dict(lanes=5),
                                   dict(accumulators=3), dict(stream=False),
                                   dict(fuse_sum=False), dict(rows_per_task=1),
                                   dict(rows_per_task=4, fuse_sum=False),
                                   dict(prefetch_next_row=False)])
def test_softmax_knobs_keep_the_result(rng, knobs):
    X = pl.placeholder((6, 43), "float32", name="X")
    check(pl.build(ops.schedule_softmax(ops.softmax(X), **knobs)), rng, 6, 43)


def test_softmax_schedule_keeps_rows_in_cache():
    X = pl.placeholder((8, 64), "float32", name="X")
    sch = ops.schedule_softmax(ops.softmax(X), lanes=16)
    text = str(sch)
    assert text.startswith("for i in parallel(8):  # nontemporal=softmax")
    # two accumulator vectors per row reduction (64 columns: two whole pairs of vectors)
    assert ("softmax_max_rf[i, 16 * k_1 + k_2] = max(softmax_max_rf[i, 16 * k_1 + k_2], "
            "X[i, 32 * k_0 + 16 * k_1 + k_2])") in text
    assert "for k_1 in unrolled(2):" in text and "for k_2 in vectorized(16):" in text
    # fuse_sum (default): the exponentials and the sum's partials in one vector loop
    assert ("softmax_exp_local[i, 32 * j_0 + 16 * j_1 + j_2] = exp(X[i, 32 * j_0 + 16 * j_1 + "
            "j_2] - softmax_max[i])\n                softmax_sum_rf[i, 16 * j_1 + j_2] += "
            "softmax_exp_local[i, 32 * j_0 + 16 * j_1 + j_2]") in text
    # the exponentials live in one row-sized local buffer, never in a full-size temporary
    source = pl.build(sch).source
    assert "softmax_exp_local[64]" in source
    unstreamed = str(ops.schedule_softmax(ops.softmax(X), lanes=16, stream=False))
    assert "nontemporal" not in unstreamed


def misaligned_poison(rows, cols):
    """A NaN-filled float32 output that starts one element after a 64-byte boundary."""
    raw = np.empty(rows * cols + 32, np.float32)
    start = (-raw.ctypes.data) % 64 // 4 + 1
    y = raw[start:start + rows * cols].reshape(rows, cols)
    y[...] = np.nan
    return y


@pytest.mark.parametrize("rows, cols", [(3, 1), (2, 15), (3, 17), (2, 97), (4, 256)])
def test_softmax_streams_its_result_into_misaligned_outputs(rng, rows, cols):
    X = pl.placeholder((rows, cols), "float32", name="X")
    mod = pl.build(ops.schedule_softmax(ops.softmax(X)))
    x = (rng.standard_normal((rows, cols)) * 8).astype(np.float32)
    y = misaligned_poison(rows, cols)
    mod(x, y)
    np.testing.assert_allclose(y, numpy_softmax(x), rtol=1e-5, atol=1e-7)
    if cols > ops.knobs.default_lanes("float32") and "avx" in mod.source:
        assert "pl_store_stream_" in mod.source and "_mm_sfence();" in mod.source


def test_softmax_symbolic_sizes_one_module_for_all(rng):
    X = pl.placeholder((pl.var("R"), pl.var("Cols")), "float32", name="X")
    mod = pl.build(ops.schedule_softmax(ops.softmax(X)))
    for rows, cols in [(5, 37), (1, 1), (3, 16), (2, 100)]:
        check(mod, rng, rows, cols)


def test_softmax_bad_arguments_are_clear_errors():
    with pytest.raises(pl.ScheduleError, match="x must be a 2-D tensor"):
        ops.softmax(pl.placeholder((3,), "float32", name="X"))
    y = ops.softmax(pl.placeholder((3, 4), "float32", name="X"))
    with pytest.raises(pl.ScheduleError, match="lanes must be a positive integer"):
        ops.schedule_softmax(y, lanes=0)
    with pytest.raises(pl.ScheduleError, match="accumulators must be a positive integer"):
        ops.schedule_softmax(y, accumulators=0)
    with pytest.raises(pl.ScheduleError, match="rows_per_task must be a positive integer"):
        ops.schedule_softmax(y, rows_per_task=0)
    with pytest.raises(pl.ScheduleError, match="expected the result of softmax"):
        ops.schedule_softmax(y.inputs[0])


@pytest.mark.parametrize("rows, cols", [(1, 97), (15, 33), (17, 63), (17, 131), (40, 65),
                                        (33, 16)])
@pytest.mark.parametrize("fuse_sum", [True, False])
def test_softmax_row_tasks_and_fused_sum(rng, rows, cols, fuse_sum):
    """Several rows per parallel task (a partial last task) and the fused exp + sum loop, at
    row counts around the task size and widths that do not divide the vectors."""
    X = pl.placeholder((rows, cols), "float32", name="X")
    sch = ops.schedule_softmax(ops.softmax(X), rows_per_task=4, fuse_sum=fuse_sum)
    if rows >= 32:
        assert "for i_1 in range(" in str(sch)      # tasks of several rows
    check(pl.build(sch), rng, rows, cols)
    x = (rng.standard_normal((rows, cols)) * 8).astype(np.float32)
    y = misaligned_poison(rows, cols)
    pl.build(sch)(x, y)
    np.testing.assert_allclose(y, numpy_softmax(x), rtol=1e-5, atol=1e-7)


def test_softmax_row_tasks_with_symbolic_rows(rng):
    X = pl.placeholder((pl.var("R"), 70), "float32", name="X")
    sch = ops.schedule_softmax(ops.softmax(X), rows_per_task=16)
    assert str(sch).startswith("for i_0 in parallel((R - 1) // 16 + 1):")
    mod = pl.build(sch)
    for rows in (1, 15, 16, 17, 40):
        check(mod, rng, rows, 70)


@pytest.mark.parametrize("rows_per_task, row", [(2, "2 * i_0 + 1"), (1, "i + 1")])
def test_softmax_prefetches_the_next_rows_chunk_in_the_exp_loop(rng, rows_per_task, row):
    """The exp chunk j_0 of a row prefetches X[next row][16 j_0 : 16 j_0 + 16] (what the max
    pass reads there), clipped to the 131 columns; off with prefetch_next_row=False."""
    X = pl.placeholder((40, 131), "float32", name="X")
    knobs = dict(lanes=8, accumulators=2, rows_per_task=rows_per_task)
    sch = ops.schedule_softmax(ops.softmax(X), **knobs)
    assert "# prefetch=X for softmax_max_rf, 1 iteration ahead along loop i" in str(sch)
    mod = pl.build(sch)
    assert f"__builtin_prefetch(&X[{row}][16 * j_0 + prefetch_at], 0, 2);" in mod.source
    assert f"__builtin_prefetch(&X[{row}][pl_min_i64(131, 16 * j_0 + 16) - 1], 0, 2);" \
        in mod.source
    check(mod, rng, 40, 131)
    off = ops.schedule_softmax(ops.softmax(X), prefetch_next_row=False, **knobs)
    assert "__builtin_prefetch" not in pl.build(off).source
