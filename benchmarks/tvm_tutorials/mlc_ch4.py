# SPDX-License-Identifier: Apache-2.0
"""The MLC course, chapter 4 (automatic program optimization), as it writes it, on
``C = A B`` (128 x 128 x 128, float32):

- ``schedule_mm(jfactor=4)``: ``j`` split by 4, ``reorder(i, j_0, k, j_1)``,
  ``decompose_reduction(C, k)``;
- ``stochastic_schedule_mm`` and ``random_search`` (5 trials): the split factors of ``j``
  drawn by ``sample_perfect_tile(j, n=2)``; each tool draws with its own sampler (seeds 0-4),
  measures each candidate once and keeps the fastest, which is timed;
- with ``--tune`` (minutes): MetaSchedule's ``tune_tir`` (64 trials) against ``pl.tune`` (64
  trials, its own space), each tool's best timed (``tuned_rows``).

Where polyloop's spelling differs from the course's, and why:
- ``sch.sample_perfect_tile(loop=j, n=2)`` is ``sch.sample_perfect_tile(j, n=2)`` with
  ``pl.Schedule(C, seed=s)`` (TVM: ``tvm.tir.Schedule(mod, seed=s)``); both draw factors
  whose product is the extent, the innermost at most 16;
- ``tvm.build`` then ``lib.time_evaluator`` is ``pl.build`` then ``mod.benchmark``;
- ``ms.tune_tir(mod, target, config, work_dir)`` is ``pl.tune(C, trials=64, work_dir=...)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import (Out, Port, fastest, inputs_of, polyloop_seconds, rand, tvm_seconds)

TUTORIAL = "MLC course ch. 4: automatic optimization"


def _mm(n: int) -> pl.Tensor:
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    return pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")


def schedule_mm_polyloop(n: int, jfactor: int | None = 4, seed: int = 0) -> pl.Schedule:
    sch = pl.Schedule(_mm(n), seed=seed)
    block_C = sch.get_block("C")
    i, j, k = sch.get_loops(block_C)
    factors = [None, jfactor] if jfactor else sch.sample_perfect_tile(j, n=2)
    j_0, j_1 = sch.split(j, factors=factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch


def _mm_tvm(tvm: Any, n: int) -> Any:
    from tvm import te
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B, C])})


def schedule_mm_tvm(tvm: Any, n: int, jfactor: int | None = 4, seed: int = 0) -> Any:
    sch = tvm.s_tir.Schedule(_mm_tvm(tvm, n), seed=seed + 1)    # TVM seeds start at 1
    block_C = sch.get_sblock("C")
    i, j, k = sch.get_loops(block_C)
    factors = [None, jfactor] if jfactor else sch.sample_perfect_tile(loop=j, n=2)
    j_0, j_1 = sch.split(loop=j, factors=factors)
    sch.reorder(i, j_0, k, j_1)
    sch.decompose_reduction(block_C, k)
    return sch.mod


def ports(n: int = 128, trials: int = 5) -> list[Port]:
    ins = inputs_of(rand(n, n), rand(n, n))
    out = (Out((n, n)),)
    ref = lambda a, b: a.astype(np.float64) @ b  # noqa: E731
    search_inputs = ins(np.random.default_rng(1))
    return [
        Port(TUTORIAL, "schedule_mm (jfactor 4)", "TensorIR", ins, out, ref,
             lambda: schedule_mm_polyloop(n), lambda tvm: schedule_mm_tvm(tvm, n),
             rtol=1e-4, atol=1e-4),
        Port(TUTORIAL, f"random_search ({trials} trials)", "TensorIR", ins, out, ref,
             lambda: fastest([schedule_mm_polyloop(n, None, s) for s in range(trials)],
                             lambda sch: polyloop_seconds(sch, search_inputs)),
             lambda tvm: fastest([schedule_mm_tvm(tvm, n, None, s) for s in range(trials)],
                                 lambda md: tvm_seconds(tvm, md, search_inputs, out)),
             rtol=1e-4, atol=1e-4),
    ]


def small_ports() -> list[Port]:
    return ports(48, 2)
