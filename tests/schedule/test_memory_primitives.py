# SPDX-License-Identifier: Apache-2.0
"""Schedule.double_buffer and Schedule.storage_align on the shared tiles of the GPU matmul:
proven on OpenCL against NumPy (sizes that do not divide the tiles, symbolic and fixed,
outputs poisoned), every access of the lowered program inside its rotated, padded tile (isl),
the barriers only where dependences need them, refusals naming what breaks, trace replay."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.ir.dtypes import INDEX
from polyloop.ir.expr import Const
from polyloop.lower.storage import place_temporaries
from polyloop.poly.bounds import find_out_of_bounds
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.opencl import platform_available

OPENCL, OPENCL_WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
SIZES = [(70, 84, 37), (1, 1, 1), (64, 64, 16), (65, 3, 33), (20, 30, 100)]


def check(mod, rng, sizes=SIZES) -> None:
    for m, n, k in sizes:
        a = rng.standard_normal((m, k), dtype="float32")
        b = rng.standard_normal((k, n), dtype="float32")
        out = np.full((m, n), np.nan, "float32")
        mod(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def k_outer(sch):
    return next(x for x in sch.get_loops("a_fetch") if x.name == "k_outer")


def pipelined(shift: int = -1, double: bool = True):
    """matmul_gpu_shared with its copies ``-shift`` steps of k ahead, tiles double buffered."""
    sch = ops.matmul_gpu_shared()
    fetch, compute = sch.distribute(k_outer(sch), at=2)
    sch.shift(fetch, shift)
    sch.merge(fetch, compute)
    if double:
        sch.double_buffer("a_fetch")
        sch.double_buffer("b_fetch")
    return sch


def lowered_in_bounds(sch) -> bool:
    program, _, _ = place_temporaries(sch.program, sch.state.root)
    return find_out_of_bounds(program) is None


def test_the_bounds_proof_sees_the_rotating_index():
    """The check above is not vacuous: with one tile instead of two it finds the write."""
    sch = ops.matmul_gpu_pipelined()
    program, _, _ = place_temporaries(sch.program, sch.state.root)
    tile = program.buffer("a_fetch")
    one = replace(tile, shape=(Const(1, INDEX, True),) + tile.shape[1:])
    program = program.replace(buffers=tuple(one if b.name == "a_fetch" else b
                                            for b in program.buffers))
    assert "a_fetch[k_outer % 2" in str(find_out_of_bounds(program))


@needs_opencl
def test_double_buffered_tiles_need_one_barrier(rng):
    sch = ops.matmul_gpu_shared()
    sch.double_buffer("a_fetch")
    sch.double_buffer("b_fetch")
    mod = pl.build(sch, target="opencl")
    assert "__local float a_fetch[2][64][16];" in mod.source
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 1   # plain: 2
    check(mod, rng)


@needs_opencl
@pytest.mark.parametrize("fixed", [False, True], ids=["symbolic", "fixed"])
def test_software_pipelined_ladder_step_on_opencl(rng, fixed):
    sch = ops.matmul_gpu_pipelined(*((70, 84, 37) if fixed else (None,) * 3))
    assert lowered_in_bounds(sch)
    mod = pl.build(sch, target="opencl")
    assert "__local float a_fetch[2][64][17];" in mod.source      # padded rows
    assert "__local float b_fetch[2][16][64];" in mod.source
    assert "k_outer = -1" in mod.source         # the prologue fetches step 0
    assert mod.source.count("barrier(CLK_LOCAL_MEM_FENCE)") == 1
    check(mod, rng, SIZES if not fixed else [(70, 84, 37)])


@needs_opencl
def test_pipelining_without_double_buffer_keeps_the_tiles_whole(rng):
    sch = pipelined(double=False)      # values pass between iterations: one tile is wrong
    mod = pl.build(sch, target="opencl")
    assert "is stored whole in global memory" in mod.source
    check(mod, rng, [(20, 30, 100)])


def test_a_copy_two_steps_ahead_is_refused_naming_the_dependence():
    sch = pipelined(shift=-2, double=False)
    with pytest.raises(pl.ScheduleError, match=r"double_buffer\(a_fetch\) would break the "
                       r"dependence a_fetch -> insn on 'a_fetch'.*k \+ 2") as e:
        sch.double_buffer("a_fetch")
    dep = e.value.dependence
    assert (dep.kind, dep.source, dep.sink, dep.buffer) == ("RAW", "a_fetch", "insn", "a_fetch")
    assert sch.program.buffer("a_fetch").stages == 1     # the schedule is unchanged


@needs_opencl
def test_a_double_buffer_broken_later_falls_back_to_one_tile(rng):
    sch = ops.matmul_gpu_shared()
    sch.double_buffer("a_fetch")
    fetch, compute = sch.distribute(k_outer(sch), at=2)
    sch.shift(fetch, -2)
    sch.merge(fetch, compute)
    mod = pl.build(sch, target="opencl")
    assert "double buffering of a_fetch not applied" in mod.source
    check(mod, rng, [(20, 30, 100)])


def test_double_buffer_refusals():
    A = pl.placeholder((8, 8), "float32", name="A")
    B = pl.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    te = pl.Schedule(B)
    with pytest.raises(pl.ScheduleError, match="writes 'B', an argument"):
        te.double_buffer("B")
    te.cache_read("B", "A", "global")
    with pytest.raises(pl.ScheduleError, match="global memory"):
        te.double_buffer("A_global")


def test_storage_align_refusals():
    sch = ops.matmul_gpu_shared()
    for kwargs, text in [({"axis": 4}, "axis must be"), ({"axis": -1}, "axis must be"),
                         ({"factor": 0}, "factor must be"), ({"offset": 16}, "less than factor"),
                         ({"offset": -1}, "offset must be")]:
        args = {"axis": -2, "factor": 16, "offset": 1} | kwargs
        with pytest.raises(pl.ScheduleError, match=text):
            sch.storage_align("a_fetch", "a_fetch", **args)
    with pytest.raises(pl.ScheduleError, match="not 'b_fetch'"):
        sch.storage_align("a_fetch", "b_fetch", -2, 16, 1)
    assert sch.program.buffer("a_fetch").align == ()


@needs_opencl
def test_storage_align_pads_the_declaration_only(rng):
    sch = ops.matmul_gpu_shared()
    sch.storage_align("b_fetch", "b_fetch", axis=-2, factor=32, offset=4)   # 64 -> 68
    assert lowered_in_bounds(sch)
    mod = pl.build(sch, target="opencl")
    assert "__local float b_fetch[16][68];" in mod.source
    check(mod, rng, SIZES[:2])


def test_trace_records_and_replays_them():
    steps = [step.primitive for step in ops.matmul_gpu_pipelined().trace]
    assert steps.count("double_buffer") == 2 and "storage_align" in steps
    A = pl.placeholder((20, 24), "float32", name="A")
    B = pl.compute((20, 24), lambda i, j: A[i, j] * 2.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    sch.cache_read("B", "A", "shared")
    sch.compute_at(sch.get_block("A_shared"), i)
    sch.storage_align("A_shared", "A_shared", axis=0, factor=8, offset=1)
    again = pl.Schedule.from_trace(B, pl.Trace.from_json(sch.trace.to_json()))
    assert again.program.buffer("A_shared").align == sch.program.buffer("A_shared").align
    assert str(again) == str(sch)


@pytest.mark.skipif(not nvcc_available()[0], reason="CUDA compile check skipped: no nvcc")
def test_nvcc_compiles_the_pipelined_step():
    mod = pl.build(ops.matmul_gpu_pipelined(128, 96, 64), target="cuda")
    assert ".entry matmul" in mod.ptx and mod.source.count("__syncthreads();") == 1
    assert "float a_fetch[2][64][17];" in mod.source
    assert "*(float4 *)&b_fetch[" in mod.source        # the rotating tile keeps float4 copies
    assert "*(const float4 *)&b_fetch[" in mod.source  # ... and loads


@needs_opencl
def test_pipelined_row_sums_on_opencl(rng):
    """Another shape: a 16 x 4 tile per step of a row sum, copied one step ahead."""
    knl = pl.make_kernel("{ [i, k] : 0 <= i < n and 0 <= k < m }",
                         "out[i] = sum(k, a[i, k] * 2)",
                         args=[pl.ArrayArg("a", "float32", shape=("n", "m")),
                               pl.ArrayArg("out", "float32", shape=("n",))], name="rs")
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    knl = pl.split_iname(knl, "k", 4)
    sch = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"]).schedule
    fetch, compute = sch.distribute(k_outer(sch), at=1)
    sch.shift(fetch, -1)
    sch.merge(fetch, compute)
    sch.double_buffer("a_fetch")
    assert lowered_in_bounds(sch)
    mod = pl.build(sch, target="opencl")
    assert "__local float a_fetch[2][16][4];" in mod.source
    for n, m in [(17, 9), (1, 1), (40, 16), (33, 5)]:
        a = rng.standard_normal((n, m), dtype="float32")
        out = np.full(n, np.nan, "float32")
        mod(a, out)
        np.testing.assert_allclose(out, (a * 2).sum(1), rtol=1e-4, atol=1e-4)
