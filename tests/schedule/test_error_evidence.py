# SPDX-License-Identifier: Apache-2.0
"""A refusal for a dependence carries that dependence as data; a wrong argument carries none."""
import pytest

import polyloop as pl


def _prefix_sum():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    S = pl.compute((n,), lambda i: pl.sum(pl.where(k <= i, A[k], 0.0), axis=k), name="S")
    return pl.Schedule(S)


def test_parallel_reduction_loop_names_the_dependence():
    sch = _prefix_sum()
    _, k = sch.get_loops("S")
    with pytest.raises(pl.ScheduleError) as info:
        sch.parallel(k)
    dep = info.value.dependence
    assert isinstance(dep, pl.BrokenDependence)
    assert (dep.kind, dep.source, dep.sink, dep.buffer, dep.reduction) == ("RAW", "S", "S", "S", True)
    assert "S(" in dep.example and dep.example in str(info.value)


def test_reorder_that_breaks_a_stencil_carries_it():
    @pl.script
    def stencil(A: pl.Buffer[("n", "n"), "float64"]):
        for i in range(1, n):  # noqa: F821
            for j in range(1, n - 1):  # noqa: F821
                A[i, j] = A[i - 1, j + 1] + A[i, j]
    sch = pl.Schedule(stencil)
    i, j = sch.get_loops(sch.get_block(sch.program.statements[0].name))
    with pytest.raises(pl.ScheduleError) as info:
        sch.reorder(j, i)
    dep = info.value.dependence
    assert dep is not None and dep.buffer == "A" and dep.kind in ("RAW", "WAR")


def test_argument_error_carries_no_dependence():
    sch = _prefix_sum()
    with pytest.raises(pl.ScheduleError) as info:
        sch.get_block("nope")
    assert info.value.dependence is None
