# SPDX-License-Identifier: Apache-2.0
"""Loo.py's "temporaries in local memory" kernel: a temporary in local memory is one copy per
work-group (a private one, one per work-item), so binding the loops around it to a GPU is legal
when no value crosses a work-group, and refused when one does."""
import numpy as np
import pytest

import polyloop as pl

DOMAIN = "{ [i_outer, i_inner, k] : 0 <= 16*i_outer + i_inner < n and 0 <= i_inner, k < 16%s }"
BODY = """
<> a_temp[i_inner] = a[16*i_outer + i_inner] {priority=10}
out[16*i_outer + i_inner] = sum(k, a_temp[k])
"""


def _tutorial(extra: str = "", assume: str | None = None):
    knl = pl.make_kernel(DOMAIN % extra, BODY)
    if assume:
        knl = pl.assume(knl, assume)
    knl = pl.tag_inames(knl, dict(i_outer="g.0", i_inner="l.0"))
    return pl.set_temporary_address_space(knl, "a_temp", "local")


def _group_sums(a: np.ndarray) -> np.ndarray:
    n = len(a)
    out = np.empty_like(a)
    for g in range(0, n, 16):
        out[g:g + 16] = a[g:g + 16].sum()
    return out


@pytest.fixture(scope="module")
def opencl():
    pytest.importorskip("pyopencl", reason="OpenCL runs need pyopencl (pip extra 'opencl')")


def test_reader_runs_after_the_whole_loop_of_the_writer():
    """``a_temp[k]`` reads elements later iterations of i_inner write: as in Loo.py it runs
    after all of them (its own i_inner loop), not in the writer's iteration."""
    knl = pl.make_kernel(DOMAIN % "", BODY)
    text = str(knl)
    loops = text[text.index("loops:"):]
    assert loops.count("for i_inner") == 2


def test_tutorial_kernel_gives_loopys_answer_on_opencl(opencl, rng):
    mod = pl.build(_tutorial(assume="n mod 16 = 0"), target="opencl")
    assert "__local float a_temp[16]" in mod.source and "barrier(CLK_LOCAL_MEM_FENCE)" in mod.source
    for n in (48, 16 * 16):
        a = rng.standard_normal(n).astype("float32")
        out = np.full(n, np.nan, "float32")
        mod(a, out)
        np.testing.assert_allclose(out, _group_sums(a), rtol=1e-5, atol=1e-5)


def test_sizes_not_a_multiple_of_the_group_when_reads_stay_in_it(opencl, rng):
    """Bounding k by n keeps every read in elements its work-group writes: any n works."""
    mod = pl.build(_tutorial(" and 16*i_outer + k < n"), target="opencl")
    assert "__local" in mod.source
    for n in (37, 5, 16):
        a = rng.standard_normal(n).astype("float32")
        out = np.full(n, np.nan, "float32")
        mod(a, out)
        np.testing.assert_allclose(out, _group_sums(a), rtol=1e-5, atol=1e-5)


def test_a_value_crossing_work_groups_is_refused():
    """Without ``n mod 16 = 0`` the last work-group reads a_temp elements only the one before
    it wrote: with one copy per work-group that value is never seen."""
    with pytest.raises(pl.ScheduleError, match=r"(?s)i_outer.*RAW.*a_temp.*own copy of "
                                               r"temporary a_temp.*pl\.assume"):
        _tutorial()


def test_a_private_temporary_read_by_other_work_items_stays_correct(opencl, rng):
    """Left private, a_temp is read by other work-items than its writers: no copy per
    work-item can hold that, so it is kept whole in global memory (with a barrier), which
    gives the same answer."""
    knl = pl.make_kernel(DOMAIN % " and 16*i_outer + k < n", BODY)
    mod = pl.build(pl.tag_inames(knl, dict(i_outer="g.0", i_inner="l.0")), target="opencl")
    assert "__global float *restrict a_temp" in mod.source
    a = rng.standard_normal(37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, _group_sums(a), rtol=1e-5, atol=1e-5)


def test_priority_must_be_an_integer():
    with pytest.raises(pl.ParseError, match="priority='high' is not an integer"):
        pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[i] {priority=high}")


def test_priority_orders_instructions_free_to_run(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", ["x[i] = a[i]", "y[i] = 2 * a[i] {priority=5}"])
    assert [s.buffer for s in knl.program.statements] == ["y", "x"]
