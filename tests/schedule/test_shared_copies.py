# SPDX-License-Identifier: Apache-2.0
"""Shared-memory tiles the way a TVM user writes them: cache_read(..., "shared") of a matmul's
operands, compute_at at the outer reduction loop, under work-group and work-item loops. Each
work-group copies its own tile once per iteration (before or after the loops are bound), the
copy's loops can be spread over the work-items, the OpenCL kernel has a barrier after the
copies and before the next copies overwrite the tiles, and the result equals NumPy's at sizes
that divide no tile and at symbolic sizes. A copy that would read values the program changes
in between is still refused."""
from __future__ import annotations

import pytest

import polyloop as pl

from matmul_checks import check_matmul  # tests/ is on sys.path (rootdir conftest)


def matmul(m, n, k):
    A = pl.placeholder((m, k), "float32", name="A")
    B = pl.placeholder((k, n), "float32", name="B")
    r = pl.reduce_axis((0, k), name="k")
    return pl.compute((m, n), lambda i, j: pl.sum(A[i, r] * B[r, j], axis=r), name="C")


def tile_loops(sch):
    """C's loops in 16x16 tiles and steps of 8 along k: (io, jo, ko, ii, ji, ki)."""
    i, j, kk = sch.get_loops("C")
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(kk, [None, 8])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return io, jo, ko, ii, ji, ki


def tiled(C, *, bind_first: bool, spread: bool = False):
    """The user's schedule: 16x16 work-groups, steps of 8 along k, both operands in shared
    memory at the step loop (bound before or after the copies are placed)."""
    sch = pl.Schedule(C)
    io, jo, ko, ii, ji, ki = tile_loops(sch)

    def bind():
        for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                           (ji, "threadIdx.x")):
            sch.bind(loop, axis)
    if bind_first:
        bind()
    for buf in ("A", "B"):
        copy = sch.cache_read("C", buf, "shared")
        sch.compute_at(copy, ko)
        if spread:      # the tile's elements over the work-group's 16x16 work-items
            ty, tx = sch.split(sch.fuse(*sch.get_loops(copy)[-2:]), [None, 16])
            sch.bind(ty, "threadIdx.y")
            sch.bind(tx, "threadIdx.x")
    if not bind_first:
        bind()
    return sch


def test_each_work_group_copies_its_own_tile_per_step():
    C = matmul(70, 84, 37)
    for bind_first in (True, False):
        sch = tiled(C, bind_first=bind_first)
        text = str(sch)
        again = pl.Schedule.from_trace(C, pl.Trace.from_json(sch.trace.to_json()))
        assert str(again) == text       # the trace replays: the same placement
        # the copy runs in every iteration of the loops around k_0: no "if j_0 == 0"
        assert "A_shared[i_0, j_0, k_0, 16 * i_0 + A_shared_dim_0, 8 * k_0 + A_shared_dim_1]" \
            in text
        assert "if j_0 == 0" not in text and "if i_0 == 0" not in text


def test_a_copy_computed_once_stays_so_where_nothing_is_bound():
    sch = pl.Schedule(matmul(70, 84, 37))
    i, j, kk = sch.get_loops("C")
    io, jo, ii, ji = sch.tile(i, j, 16, 16)
    sch.compute_at(sch.cache_read("C", "B", "shared"), jo)
    assert "if i_0 == 0:" in str(sch)     # a panel of B copied once, in the first tile row


def opencl():
    pytest.importorskip("pyopencl", reason="OpenCL runs need pyopencl (pip extra 'opencl')")
    from polyloop.runtime.opencl import platform_available
    ok, why = platform_available()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")



@pytest.mark.parametrize("bind_first, spread", [(True, False), (False, False), (True, True)])
def test_the_user_schedule_on_opencl_equals_numpy(bind_first, spread, rng):
    opencl()
    mod = pl.build(tiled(matmul(70, 84, 37), bind_first=bind_first, spread=spread),
                   target="opencl")
    body = mod.source[mod.source.index("void C_1_kernel("):]
    assert "__local float A_shared[16][8];" in body and "__local float B_shared[8][16];" in body
    loop = body[body.index("for (long k_0"):]
    first_copy, read = loop.index("A_shared["), loop.index("* B_shared[")
    # a barrier between the copies and the reads, and one before the next step's copies
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in loop[first_copy:read]
    assert "barrier(CLK_LOCAL_MEM_FENCE)" in loop[read:]
    if spread:
        assert "A_shared_dim_0_A_shared_dim_1_fused_1 = (long)get_local_id(0)" in body
    check_matmul(mod, [(70, 84, 37)], rng)


def test_binding_after_spreading_a_copy_placed_once_is_refused():
    # copying per work-group would need new copy loops: the spread ones would be lost
    with pytest.raises(pl.ScheduleError, match=r"cannot bind loop 'i_0'.*The copy 'B_shared' "
                       r"serves several iterations.*recompute=True"):
        tiled(matmul(70, 84, 37), bind_first=False, spread=True)


def test_symbolic_sizes_on_opencl_equal_numpy(rng):
    opencl()
    m, n, k = pl.var("m"), pl.var("n"), pl.var("l")
    mod = pl.build(tiled(matmul(m, n, k), bind_first=True, spread=True), target="opencl")
    check_matmul(mod, [(70, 84, 37), (5, 33, 9), (16, 16, 8)], rng)


def test_a_copy_of_values_changed_in_the_nest_is_refused():
    # T is computed inside the tile loops (at the first work-group that needs each row): a
    # copy of T per work-group would read rows another work-group has not written yet
    A = pl.placeholder((40, 24), "float32", name="A")
    B = pl.placeholder((24, 40), "float32", name="B")
    T = pl.compute((40, 24), lambda i, k: A[i, k] + 1.0, name="T")
    r = pl.reduce_axis((0, 24), name="k")
    C = pl.compute((40, 40), lambda i, j: pl.sum(T[i, r] * B[r, j], axis=r), name="C")
    sch = pl.Schedule(C)
    io, jo, ko, ii, ji, ki = tile_loops(sch)
    copy = sch.cache_read("C", "T", "shared")
    sch.compute_at(copy, ko)
    sch.compute_at("T", ko)
    assert "if j_0 == 0:" in str(sch)
    with pytest.raises(pl.ScheduleError, match=r"cannot bind loop 'j_0'.*RAW dependence") as e:
        sch.bind(jo, "blockIdx.x")
    assert e.value.dependence is not None


def test_a_copy_of_a_buffer_updated_in_its_loop_nest_is_refused():
    knl = pl.make_kernel(
        "{ [t, i]: 0 <= t < 4 and 1 <= i < n - 1 }",
        """
        b[i] = a[i - 1] + a[i + 1] {id=avg}
        a[i] = b[i] {id=back, dep=avg}
        """, name="sweep")
    sch = pl.Schedule(knl.program)
    with pytest.raises(pl.ScheduleError, match="written inside the loop nest"):
        sch.cache_read(sch.blocks()[0], "a", "shared")


def test_a_copy_of_a_tile_filled_inside_the_nest_is_refused():
    # the reduction's initialization has a nest of its own before the tiles' nest: the copy
    # of A_shared must not go there, before A_shared is filled
    sch = tiled(matmul(70, 84, 37), bind_first=True)
    with pytest.raises(pl.ScheduleError, match="'A_shared' is written inside the loop nest"):
        sch.cache_read("C", "A_shared", "local")
    with pytest.raises(pl.ScheduleError, match="does not read 'A'; name a buffer"):
        sch.cache_read("C", "A", "local")


def test_a_copy_per_work_item_is_still_refused():
    # one copy per work-item inside the work-item loops is not built yet: the refusal stays
    sch = pl.Schedule(matmul(70, 84, 37))
    i, j, kk = sch.get_loops("C")
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, ii, ji, kk)
    for loop, axis in ((io, "blockIdx.y"), (jo, "blockIdx.x"), (ii, "threadIdx.y"),
                       (ji, "threadIdx.x")):
        sch.bind(loop, axis)
    copy = sch.cache_read("C", "A", "shared")
    with pytest.raises(pl.ScheduleError, match="compute_at.A_shared, j_1. would make thread loop 'j_0' carry the RAW"):
        sch.compute_at(copy, ji)
