# SPDX-License-Identifier: Apache-2.0
"""Explicit barriers in make_kernel's instructions (Loo.py's ``... lbarrier {id=b, dep=w}``):
ordering, loop nesting, emission on OpenCL and CUDA, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen.cuda import generate_cuda
from polyloop.lower.launches import lower_device
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()

DOMAIN = "{ [g, l] : 0 <= g < m and 0 <= l < 16 }"
# written out of order on purpose: the deps put the barrier between the two instructions
ROTATE = """
    out[16 * g + l] = t[g, l] * t[g, (l + 1) % 16]   {id=use, dep=b}
    t[g, l] = 2 * a[16 * g + l]                      {id=fill}
    ... lbarrier                                    {id=b, dep=fill, inames=g}
"""


def _reference(a):
    t = 2 * a.reshape(-1, 16)
    return (t * np.roll(t, -1, axis=1)).ravel()


def _run(mod, m, rng):
    a = rng.standard_normal(16 * m).astype("float32")
    out = np.full(16 * m, np.nan, "float32")
    t = np.full((m, 16), np.nan, "float32")
    mod(a=a, out=out, t=t)
    np.testing.assert_allclose(out, _reference(a), rtol=1e-6)


def test_a_barrier_separates_the_loops_below_its_inames(rng):
    knl = pl.make_kernel(DOMAIN, ROTATE)
    assert [s.name for s in knl.program.statements] == ["fill", "b", "use"]
    loops = knl.loops()
    assert loops.count("for l in range(16):") == 2 and loops.count("for g in range(m):") == 1
    mod = pl.build(knl)
    assert "barrier" not in mod.source          # on C the order alone is enough
    _run(mod, 3, rng)


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
@pytest.mark.parametrize("m", [1, 5])
def test_a_local_barrier_is_emitted_on_opencl(rng, m):
    knl = pl.tag_inames(pl.make_kernel(DOMAIN, ROTATE), {"g": "g.0", "l": "l.0"})
    mod = pl.build(knl, target="opencl")
    body = mod.source.split("__kernel")[1]
    assert body.index("2.0f * a[") < body.index("barrier(CLK_LOCAL_MEM_FENCE") \
        < body.index("out[")
    _run(mod, m, rng)


def test_a_local_barrier_is_syncthreads_on_cuda():
    knl = pl.tag_inames(pl.make_kernel(DOMAIN, ROTATE), {"g": "g.0", "l": "l.0"})
    sch = knl.schedule
    source = generate_cuda(lower_device(sch.program, sch.state.root))
    assert "__syncthreads();" in source


def test_a_barrier_inside_a_work_item_loop_is_refused_naming_the_loop():
    # without inames= the barrier sits in the loops of both instructions, l included
    knl = pl.make_kernel(DOMAIN, ROTATE.replace(", inames=g", "").replace(
        "t[g, (l + 1) % 16]", "3"))
    assert "__barrier_local_b[g, l]" in knl.loops()
    knl = pl.tag_inames(knl, {"g": "g.0", "l": "l.0"})
    with pytest.raises(pl.BuildError, match="barrier 'b' is inside work-item loop 'l'.*"
                                            "divergent control flow.*inames="):
        pl.build(knl, target="opencl")


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_a_global_barrier_splits_the_launches(rng):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", """
        c[i] = a[i] + 1         {id=first}
        ... gbarrier            {id=gb, dep=first}
        out[i] = c[n - 1 - i]   {dep=gb}
    """)
    knl = pl.split_iname(knl, "i", 8, outer_tag="g.0", inner_tag="l.0")
    mod = pl.build(knl, target="opencl")
    assert "2 kernel(s)" in mod.source
    a = rng.standard_normal(21).astype("float32")
    out, c = np.full(21, np.nan, "float32"), np.full(21, np.nan, "float32")
    mod(a=a, out=out, c=c)
    np.testing.assert_allclose(out, (a + 1)[::-1], rtol=1e-6)


@pytest.mark.parametrize("text, message", [
    ("... gbarrier {inames=g}\nout[g] = 1", "a global barrier inside loop\\(s\\) g"),
    ("... wait\nout[g] = 1", "after '...' write lbarrier"),
    ("if g > 0\n ... lbarrier\nend\nout[g] = 1", "inside an 'if' block"),
    ("out[g] = 1 {inames=g}", "inames= is an option of barriers"),
    ("out[g] = 1 {id=x}\n... lbarrier {dep=x, inames=q}", "inames= names q"),
    ("out[g] = 1 {id=x}\n... lbarrier {id=1b}", "barrier id '1b' is not an identifier"),
])
def test_barrier_spelling_errors_point_at_the_line(text, message):
    with pytest.raises(pl.ParseError, match=message):
        pl.make_kernel(DOMAIN, text)
