# SPDX-License-Identifier: Apache-2.0
"""A nest left unbound on a GPU target runs on work-groups when its outer loop carries no
dependence, and stays in one work-item (correct, as written) when it does."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.loops import LoopKind
from polyloop.runtime.opencl import platform_available
from polyloop.schedule.gpu_default import map_unbound_nests

AVAILABLE, WHY = platform_available()


def _kinds(sch):
    out, stack = [], list(sch.state.root.children)
    while stack:
        n = stack.pop()
        if hasattr(n, "kind"):
            out.append((n.name, n.kind, n.thread.value if n.thread else None))
            stack.extend(n.children)
    return out


def test_unbound_parallel_nest_is_mapped_and_a_dependent_one_is_not():
    n = pl.var("n")
    A = pl.placeholder((n, 8), "float32", name="A")
    B = pl.compute((n, 8), lambda i, j: A[i, j] * 2.0, name="B")
    mapped = map_unbound_nests(pl.Schedule(B))
    assert ("i_0", LoopKind.THREAD, "blockIdx.x") in _kinds(mapped)
    assert ("i_1", LoopKind.THREAD, "threadIdx.x") in _kinds(mapped)

    def prefix(n: int, x: pl.Buffer[("n",), "float32"]):
        for i in range(1, n):
            x[i] = x[i] + x[i - 1]
    serial = pl.Schedule(pl.script(prefix))
    assert str(map_unbound_nests(serial)) == str(serial)


def test_a_bound_schedule_is_left_as_the_user_made_it():
    A = pl.placeholder((64,), "float32", name="A")
    B = pl.compute((64,), lambda i: A[i] + 1.0, name="B")
    sch = pl.Schedule(B)
    (i,) = sch.get_loops(sch.get_block("B"))
    o, inner = sch.split(i, factor=16)
    sch.bind(o, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    assert str(map_unbound_nests(sch)) == str(sch)


@pytest.mark.skipif(not AVAILABLE, reason=f"OpenCL unavailable: {WHY}")
def test_opencl_runs_an_unbound_stage_on_work_groups(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    mod = pl.build(B, target="opencl")
    assert "of (64, 1, 1) work-items" in mod.source
    a = rng.standard_normal(131).astype("float32")
    out = np.full(131, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)
