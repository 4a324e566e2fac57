# SPDX-License-Identifier: Apache-2.0
"""The OpenCL body of a work-item is built by isl with the hardware ids as parameters
(``poly.astgen``, ``poly.hardware_ids``). Where the ids enter the statements only as the values
of their iterators, the build is given the size parameters' facts alone (``lighter_build``):
the same code for less work. These kernels must come out exactly as with the full context, and both kinds of
kernel (lighter build taken, refused) must be among them."""
from __future__ import annotations

import polyloop as pl
from polyloop.codegen.opencl import generate_opencl
from polyloop.lower.launches import lower_device
from polyloop.poly import hardware_ids
from polyloop.schedule.kernel import schedule_of
from seed_kernels import tiled_matmul  # tests/ is on sys.path (rootdir conftest)


def _kernels():
    yield tiled_matmul(prefetch=False)
    yield tiled_matmul(prefetch=True)
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    yield pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
    knl = pl.make_kernel(
        "{ [c, y, x, dy, dx] : 0 <= c < C and 0 <= y < H and 0 <= x < W and 0 <= dy, dx < 3 }",
        "out[c, y, x] = sum((dy, dx), inp[c, y + dy, x + dx] * w[c, dy, dx])")
    knl = pl.tag_inames(knl, {"c": "g.0"})
    yield pl.split_iname(knl, "x", 8, inner_tag="l.0")
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j <= i }", "out[i, j] = a[i, j] + 1")
    yield pl.split_iname(knl, "i", 4, outer_tag="g.0", inner_tag="l.0")


def _source(knl) -> str:
    sch = schedule_of(knl)
    return generate_opencl(lower_device(sch.program, sch.state.root))


def test_lighter_build_gives_the_same_code(monkeypatch):
    taken = []
    plain = hardware_ids.lighter_build

    def record(ctx, doms, hardware):
        got = plain(ctx, doms, hardware)
        taken.append(got[0] is not ctx)
        return got
    monkeypatch.setattr(hardware_ids, "lighter_build", record)
    light = [_source(k) for k in _kernels()]
    assert True in taken and False in taken
    monkeypatch.setattr(hardware_ids, "lighter_build", lambda ctx, doms, hardware: (ctx, doms))
    full = [_source(k) for k in _kernels()]
    for a, b in zip(light, full):
        assert a == b
