# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "Scan and Recurrent Kernel", as it writes it: a cumulative sum down the rows
of an ``m x n`` matrix (symbolic sizes) with ``te.scan``, its schedule, a multi-stage scan and
a scan with two states. Sizes: ``m = 1024``, ``n = 4096`` (two states: ``l = 1024``).

- ``scan``: ``s_init = X[0, i]``, ``s_update[t, i] = s_state[t - 1, i] + X[t, i]``;
- ``scan, scheduled``: the tutorial splits ``i`` of both stages by 256 and binds the parts to
  ``blockIdx.x`` / ``threadIdx.x``; on a CPU the outer part is parallel and the inner one
  vectorized;
- ``multi-stage``: ``s_update1 = s_state[t - 1, i] * 2``, ``s_update2 = s_update1 + X[t, i]``
  (100 x 16384: the doubling recurrence grows like 2^t, and float32 ends near 2^128);
- ``two states``: ``s1[t, i] = s1[t - 1, i] + X[t, i]``, ``s2[t, j] = s2[t - 1, j] + s1[t - 1, 0]``.

Where polyloop's spelling differs from the tutorial's, and why:
- ``pl.scan(init, update, state, inputs=[X])`` takes one state, and the update reads it
  directly: the multi-stage update is written as one expression (``s_state[t - 1, i] * 2 +
  X[t, i]``: the tutorial's TVM inlines ``s_update1`` the same way when it lowers), and the scan
  with two states as loops with ``@pl.script`` (polyloop's front end for recurrences that
  tensor expressions do not hold);
- the tutorial's ``s[s_update].split(s_update.op.axis[1], ...)`` is
  ``sch.split(sch.get_loops("scan")[1], ...)``: a scan is one block with two statements (its
  first rows and the update), each with its own loops.

TVM 0.27 cannot lower ``te.scan`` any more (``create_prim_func`` accepts only placeholders and
computes): its side is the same loops in TVMScript. It refuses ``parallel`` and ``vectorize`` on
the update's loops (a block that reads the buffer it writes is neither "complete" nor a
reduction for TensorIR), so its scheduled scan splits them and runs them serially; polyloop
proves from the exact dependences that ``i`` carries none and runs them as scheduled.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "Scan and recurrent kernel"


def scan_polyloop(step: str) -> Any:
    m, n = pl.var("m"), pl.var("n")
    X = pl.placeholder((m, n), "float32", name="X")
    s_state = pl.placeholder((m, n), "float32", name="s_state")
    s_init = pl.compute((1, n), lambda _, i: X[0, i], name="s_init")
    if step == "multi-stage":
        s_update = pl.compute((m, n), lambda t, i: s_state[t - 1, i] * 2.0 + X[t, i],
                              name="s_update")
    else:
        s_update = pl.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    s_scan = pl.scan(s_init, s_update, s_state, inputs=[X], name="s_scan")
    if step != "scheduled":
        return s_scan
    sch = pl.Schedule(s_scan)
    for stmt in sch.program.statements:
        _, i = sch.get_loops(stmt.name)
        xo, xi = sch.split(i, factor=256)
        sch.parallel(xo)
        xi0, xi1 = sch.split(xi, factor=16)
        sch.vectorize(xi1)
    return sch


@pl.script
def two_states(X: pl.Buffer[("m", "n"), "float32"], s1: pl.Buffer[("m", "n"), "float32"],
               s2: pl.Buffer[("m", "l"), "float32"]):
    assert m >= 1 and n >= 1
    for i in range(n):
        s1[0, i] = X[0, i]
    for j in range(l):
        s2[0, j] = 0.0
    for t in range(1, m):
        for i in range(n):
            s1[t, i] = s1[t - 1, i] + X[t, i]
        for j in range(l):
            s2[t, j] = s2[t - 1, j] + s1[t - 1, 0]


def scan_tvm(tvm: Any, step: str) -> Any:
    from tvm.script import tirx as T
    twice = step == "multi-stage"

    @T.prim_func(s_tir=True)
    def scan(x: T.handle, s: T.handle):
        m, n = T.int32(), T.int32()
        X = T.match_buffer(x, (m, n))
        S = T.match_buffer(s, (m, n))
        for i in range(n):
            with T.sblock("s_init"):
                vi = T.axis.spatial(n, i)
                S[0, vi] = X[0, vi]
        for t in range(1, m):
            for i in range(n):
                with T.sblock("s_update"):
                    vt = T.axis.opaque(m, t)
                    vi = T.axis.spatial(n, i)
                    if twice:
                        S[vt, vi] = S[vt - 1, vi] * T.float32(2) + X[vt, vi]
                    else:
                        S[vt, vi] = S[vt - 1, vi] + X[vt, vi]
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": scan}))
    if step == "scheduled":
        for name in ("s_init", "s_update"):
            i = sch.get_loops(sch.get_sblock(name))[-1]
            xo, xi = sch.split(i, [None, 256])
            _, xi1 = sch.split(xi, [None, 16])
            if name == "s_init":    # TVM refuses parallel/vectorize on the update (see above)
                sch.parallel(xo)
                sch.vectorize(xi1)
    return sch.mod


def two_states_tvm(tvm: Any) -> Any:
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def scan2(x: T.handle, a: T.handle, b: T.handle):
        m, n, l_ = T.int32(), T.int32(), T.int32()
        X = T.match_buffer(x, (m, n))
        S1 = T.match_buffer(a, (m, n))
        S2 = T.match_buffer(b, (m, l_))
        for i in range(n):
            with T.sblock("s_init1"):
                vi = T.axis.spatial(n, i)
                S1[0, vi] = X[0, vi]
        for j in range(l_):
            with T.sblock("s_init2"):
                vj = T.axis.spatial(l_, j)
                S2[0, vj] = T.float32(0)
        for t in range(1, m):
            for i in range(n):
                with T.sblock("s_update1"):
                    vt = T.axis.opaque(m, t)
                    vi = T.axis.spatial(n, i)
                    S1[vt, vi] = S1[vt - 1, vi] + X[vt, vi]
            for j in range(l_):
                with T.sblock("s_update2"):
                    vt = T.axis.opaque(m, t)
                    vj = T.axis.spatial(l_, j)
                    S2[vt, vj] = S2[vt - 1, vj] + S1[vt - 1, 0]
    return tvm.IRModule({"main": scan2})


def _cumsum(x: np.ndarray, twice: bool = False) -> np.ndarray:
    out = np.empty(x.shape)
    out[0] = x[0]
    for t in range(1, x.shape[0]):
        out[t] = out[t - 1] * (2.0 if twice else 1.0) + x[t]
    return out


def _two_states(x: np.ndarray, lcols: int) -> tuple[np.ndarray, np.ndarray]:
    s1 = np.cumsum(x.astype(np.float64), axis=0)
    s2 = np.zeros((x.shape[0], lcols))
    for t in range(1, x.shape[0]):
        s2[t] = s2[t - 1] + s1[t - 1, 0]
    return s1, s2


def ports(m: int = 1024, n: int = 4096, lcols: int = 1024) -> list[Port]:
    ins = inputs_of(rand(m, n))
    out = (Out((m, n)),)
    result = [Port(TUTORIAL, f"scan{'' if step == 'plain' else ', ' + step}", "", ins, out,
                   lambda x, step=step: _cumsum(x, twice=step == "multi-stage"),
                   lambda step=step: scan_polyloop(step),
                   lambda tvm, step=step: scan_tvm(tvm, step), rtol=1e-3, atol=1e-3)
              for step in ("plain", "scheduled", "multi-stage")]
    # the doubling recurrence grows like 2^t: at most 100 steps (float32 stays finite)
    short = min(m, 100)
    result[2] = Port(TUTORIAL, "scan, multi-stage", "", inputs_of(rand(short, 4 * n)),
                     (Out((short, 4 * n)),),
                     lambda x: _cumsum(x, twice=True), lambda: scan_polyloop("multi-stage"),
                     lambda tvm: scan_tvm(tvm, "multi-stage"), rtol=1e-4, atol=1e-3)
    result.append(Port(TUTORIAL, "scan, two states", "", ins, (Out((m, n)), Out((m, lcols))),
                       lambda x: _two_states(x, lcols), lambda: two_states, two_states_tvm,
                       rtol=1e-3, atol=1e-2))
    return result


def small_ports() -> list[Port]:
    return ports(13, 37, 21)
