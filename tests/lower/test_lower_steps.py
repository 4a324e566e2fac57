# SPDX-License-Identifier: Apache-2.0
"""Lowering is a list of named steps: POLYLOOP_DUMP=lower prints each, and an error inside a
step names it."""
from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.ir.loops import LoopKind
from polyloop.ir.thread_axis import ThreadAxis
from polyloop.poly.tree_edits import replace_node
from polyloop.schedule.kernel import schedule_of

# the module, not the function the package re-exports under the same name
lowering = importlib.import_module("polyloop.lower.lower")


def _two_stage(n):
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    return pl.compute((n,), lambda i: B[i] + 1.0, name="C")


@pytest.fixture
def dump_lower(monkeypatch):
    monkeypatch.setattr(config, "CONFIG",
                        dataclasses.replace(config.CONFIG, dump=frozenset({"lower"})))


def test_every_step_is_dumped_in_order(dump_lower, capsys):
    mod = pl.build(_two_stage(pl.var("n")))
    err = capsys.readouterr().err
    names = [step.name for step in lowering.STEPS]
    assert len(names) == 13 and len(set(names)) == 13
    positions = [err.index(f"# --- after {name}\n") for name in names]
    assert positions == sorted(positions)
    # before the loop AST exists the program is shown (its temporary B), then the loops
    assert "# temp   B: float32[n]" in err.split("# --- after build loop AST")[0]
    assert "for i in range(n):" in err.split("# --- after build loop AST")[1]
    a = np.random.rand(13).astype("float32")
    out = np.full(13, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_nothing_is_dumped_without_the_setting(capsys):
    assert "lower" not in config.CONFIG.dump
    pl.build(_two_stage(7))
    assert "# --- after" not in capsys.readouterr().err


def test_a_bug_inside_a_step_names_the_step(monkeypatch):
    def broken(program, root, body):
        raise KeyError("loop 3")
    monkeypatch.setattr(lowering, "apply_tensorize", broken)
    with pytest.raises(pl.PolyloopError, match=r"lowering step 'tensorize' failed: KeyError"):
        pl.build(_two_stage(7))


def test_a_polyloop_error_inside_a_step_keeps_its_type_and_names_the_step(monkeypatch):
    def refused(program, root, body):
        raise pl.BuildError("the nest no longer matches")
    monkeypatch.setattr(lowering, "apply_prefetch", refused)
    with pytest.raises(pl.BuildError, match="no longer matches") as info:
        pl.build(_two_stage(7))
    assert "raised in lowering step 'prefetch'" in info.value.__notes__


# the GPU lowering: its own steps around each launch's kernel -----------------------------------

launches = importlib.import_module("polyloop.lower.launches")


def _gpu_schedule():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]", name="twice")
    knl = pl.split_iname(knl, "i", 16, outer_tag="g.0", inner_tag="l.0")
    return schedule_of(knl)


def test_every_device_step_is_dumped_in_order(dump_lower, capsys):
    sch = _gpu_schedule()
    device = launches.lower_device(sch.program, sch.state.root)
    err = capsys.readouterr().err
    names = [step.name for step in launches.DEVICE_STEPS]
    assert len(set(names) | {s.name for s in lowering.STEPS}) == len(names) + len(lowering.STEPS)
    positions = [err.index(f"# --- after {name}\n") for name in names]
    assert positions == sorted(positions)
    # the kernel's own steps run inside 'lower launches', after the barriers are placed
    inner = err.index("# --- after build loop AST\n")
    assert positions[names.index("barriers")] < inner < positions[names.index("lower launches")]
    assert "# launch twice  groups" in err.split("# --- after launch sizes")[1]
    finished = err.split("# --- after finish launches")[1]
    assert "for i_inner in bind(16, 'threadIdx.x')" in finished and "out[" in finished
    assert [x.items for x in device.launches] == [(16, 1, 1)]


def test_a_bug_inside_a_device_step_names_the_step(monkeypatch):
    def broken(program, tree):
        raise KeyError("gap 0")
    monkeypatch.setattr(launches, "_with_barriers", broken)
    sch = _gpu_schedule()
    with pytest.raises(pl.PolyloopError, match=r"lowering step 'barriers' failed: KeyError"):
        launches.lower_device(sch.program, sch.state.root)


def test_a_user_error_inside_a_device_step_keeps_its_type_and_names_the_step():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    sch = pl.Schedule(pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B"))
    _, j = sch.get_loops("B")
    # a work-group loop inside the serial loop i: bind refuses it, so the tree is edited by hand
    node = sch.state.loop(j.id)
    bound = dataclasses.replace(node, kind=LoopKind.THREAD, thread=ThreadAxis.BLOCK_X)
    root = replace_node(sch.state.root, j.id, bound)
    with pytest.raises(pl.BuildError, match="would run inside loop 'i'") as info:
        launches.lower_device(sch.program, root)
    assert "raised in lowering step 'launch sizes'" in info.value.__notes__


def test_the_dumped_gpu_build_still_computes(dump_lower, capsys):
    from polyloop.runtime.opencl import platform_available
    ok, why = platform_available()
    if not ok:
        pytest.skip(f"no OpenCL platform: {why}")
    mod = pl.build(_gpu_schedule(), target="opencl")
    assert "# --- after finish launches" in capsys.readouterr().err
    a = np.random.rand(37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, 2 * a, rtol=1e-6)
