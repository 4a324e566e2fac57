# SPDX-License-Identifier: Apache-2.0
"""Shared-memory tiles in the GPU tuning space: the thread-tile rule draws copies of both
operands of a matmul into the work-group's shared memory at the reduction step loop, the copies
are spread over the work-items, and the drawn schedules compute NumPy's result (outputs
poisoned, sizes that divide no tile, symbolic sizes); pl.tune on OpenCL verifies every
candidate, shared tiles included."""
from __future__ import annotations

import json

import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.tune.measure import LocalRunner, build_one
from polyloop.tune.rules_gpu import gpu_space
from polyloop.tune.space import draw

pytest.importorskip("pyopencl", reason="OpenCL tuning needs PyOpenCL (the opencl extra)")
from polyloop.runtime.opencl import platform_available  # noqa: E402

from matmul_checks import check_matmul  # tests/ is on sys.path (rootdir conftest)

OPENCL, OPENCL_WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {OPENCL_WHY}")


def matmul(m, n, k):
    A = pl.placeholder((m, k), "float32", name="A")
    B = pl.placeholder((k, n), "float32", name="B")
    r = pl.reduce_axis((0, k), name="r")
    return pl.compute((m, n), lambda i, j: pl.sum(A[i, r] * B[r, j], axis=r), name="C")


def with_shared_tiles(program, count):
    """The first ``count`` drawn schedules (seeds 0, 1, ...) that hold shared tiles."""
    out = []
    for seed in range(40):
        sch = draw(program, gpu_space, seed=seed)
        if "A_shared" in str(sch) and "B_shared" in str(sch):
            out.append(sch)
            if len(out) == count:
                return out
    raise AssertionError("the GPU space drew no shared tiles in 40 draws")



def test_the_space_draws_shared_tiles_spread_over_the_work_items():
    sch = with_shared_tiles(pl.to_program(matmul(70, 84, 37)), 1)[0]
    text = str(sch)
    copy = next(line for line in text.splitlines() if "A_shared[" in line and "= A[" in line)
    own = [line for line in text[:text.index(copy)].splitlines() if "for A_shared" in line]
    assert "'threadIdx.x')" in own[-1]      # the copy's innermost loop runs on work-items
    steps = [s.primitive for s in sch.trace]
    assert steps.count("cache_read") == 2 and "cache_write" not in steps


@needs_opencl
def test_drawn_shared_tiles_compute_numpys_result(rng):
    for sch in with_shared_tiles(pl.to_program(matmul(70, 84, 37)), 2):
        mod = pl.build(sch, target="opencl")
        assert "__local float A_shared" in mod.source
        assert "barrier(CLK_LOCAL_MEM_FENCE)" in mod.source
        check_matmul(mod, [(70, 84, 37)], rng)
    m, n, k = pl.var("m"), pl.var("n"), pl.var("k")
    sch = with_shared_tiles(pl.to_program(matmul(m, n, k)), 1)[0]
    check_matmul(pl.build(sch, target="opencl"), [(70, 84, 37), (9, 5, 3)], rng)


class InProcessBuilder:
    def build(self, jobs):
        return [build_one(j) for j in jobs]


@needs_opencl
def test_opencl_tuning_verifies_shared_tile_candidates(tmp_path, rng):
    C = matmul(70, 84, 37)
    res = pl.tune(C, target="opencl", trials=8, strategy="random", seed=1,
                  work_dir=str(tmp_path), builder=InProcessBuilder(),
                  runner=LocalRunner(timeout=60.0, repeat=1))
    assert not [r for r in res.history if r.status is Status.MISMATCH]
    shared = [r for r in res.history if '"shared"' in r.trace]
    assert any(r.status is Status.OK for r in shared), [r.status for r in res.history]
    # a shared-tile trace replays into a schedule that computes NumPy's result
    steps = json.loads(next(r.trace for r in shared if r.status is Status.OK))
    assert any(s["primitive"] == "cache_read" for s in steps)
    check_matmul(res.build(), [(70, 84, 37)], rng)
