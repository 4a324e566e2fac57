# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "Optimizing Operators with Schedule Templates and AutoTVM", as it writes it.

C = A B at N = L = M = 1024 (the tutorial's sizes), three templates:

- ``matmul_basic``: y and x split by 8, reorder (yo, xo, k, yi, xi);
- ``matmul_v1``: the same with two knobs, ``tile_y`` and ``tile_x`` in [1, 2, 4, 8, 16]: the
  25 configurations are searched (each measured once) and the fastest is timed;
- ``matmul`` with ``define_split``: each of y and x split into two factors whose product is
  its extent; the tutorial runs AutoTVM's random tuner for 10 trials: here the same 10
  configurations (drawn once with a fixed seed) are measured in each tool and each tool's
  fastest is timed.

Where polyloop's spelling differs from the tutorial's, and why:
- polyloop has no template/``ConfigSpace`` objects: a template is a Python function of its knob
  values, and the space is the list of their combinations; the search (measure each, keep the
  fastest) is the same loop for both tools. ``pl.tune`` is polyloop's own tuner (with its own
  space, chapter 4's port uses it);
- ``s[C].op.axis`` / ``s[C].op.reduce_axis[0]`` are ``sch.get_loops("C")``.

TVM 0.27 has no AutoTVM (removed with TE schedules): its side runs each configuration with the
TensorIR primitives of the template.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np

import polyloop as pl

from .common import (Out, Port, fastest, inputs_of, polyloop_seconds, rand, tvm_seconds)

TUTORIAL = "Optimizing operators with schedule templates"
KNOBS = (1, 2, 4, 8, 16)


def matmul_polyloop(n: int, l_: int, m: int, tile_y: int, tile_x: int) -> pl.Schedule:
    A = pl.placeholder((n, l_), "float32", name="A")
    B = pl.placeholder((l_, m), "float32", name="B")
    k = pl.reduce_axis((0, l_), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = pl.Schedule(C)
    y, x, k = s.get_loops("C")
    yo, yi = s.split(y, factor=tile_y)
    xo, xi = s.split(x, factor=tile_x)
    s.reorder(yo, xo, k, yi, xi)
    return s


def matmul_tvm(tvm: Any, n: int, l_: int, m: int, tile_y: int, tile_x: int) -> Any:
    from tvm import te
    import tvm.s_tir as s_tir
    A = te.placeholder((n, l_), name="A")
    B = te.placeholder((l_, m), name="B")
    k = te.reduce_axis((0, l_), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = s_tir.Schedule(te.create_prim_func([A, B, C]))
    y, x, k = s.get_loops(s.get_sblock("C"))
    yo, yi = s.split(y, [None, tile_y])
    xo, xi = s.split(x, [None, tile_x])
    s.reorder(yo, xo, k, yi, xi)
    return s.mod


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def split_configs(n: int, m: int, trials: int = 10, seed: int = 0) -> list[tuple[int, int]]:
    """``trials`` (tile_y, tile_x) drawn from the define_split space (inner factors dividing
    the extents), the same for both tools."""
    space = [(a, b) for a in _divisors(n) for b in _divisors(m)]
    return random.Random(seed).sample(space, min(trials, len(space)))


def ports(n: int = 1024, l_: int = 1024, m: int = 1024) -> list[Port]:
    ins = inputs_of(rand(n, l_), rand(l_, m))
    out = (Out((n, m)),)
    ref = lambda a, b: a.astype(np.float64) @ b  # noqa: E731
    search_inputs = ins(np.random.default_rng(1))
    knobs = [(a, b) for a in KNOBS for b in KNOBS]
    splits = split_configs(n, m)

    def searched(configs):
        def ours():
            return fastest([matmul_polyloop(n, l_, m, *c) for c in configs],
                           lambda s: polyloop_seconds(s, search_inputs))

        def theirs(tvm):
            return fastest([matmul_tvm(tvm, n, l_, m, *c) for c in configs],
                           lambda md: tvm_seconds(tvm, md, search_inputs, out))
        return ours, theirs
    v1 = searched(knobs)
    v2 = searched(splits)
    return [
        Port(TUTORIAL, "matmul_basic (8 x 8)", "", ins, out, ref,
             lambda: matmul_polyloop(n, l_, m, 8, 8),
             lambda tvm: matmul_tvm(tvm, n, l_, m, 8, 8), rtol=1e-3, atol=1e-3),
        Port(TUTORIAL, "matmul_v1: fastest of 25 knob configs", "", ins, out, ref, v1[0], v1[1],
             rtol=1e-3, atol=1e-3),
        Port(TUTORIAL, "define_split: fastest of 10 random configs", "", ins, out, ref,
             v2[0], v2[1], rtol=1e-3, atol=1e-3),
    ]


def small_ports() -> list[Port]:
    return ports(48, 37, 40)[:1] + _small_searched()


def _small_searched() -> list[Port]:
    # the searches at a small size, over a few configurations (what the test can afford)
    n, l_, m = 40, 29, 24
    ins = inputs_of(rand(n, l_), rand(l_, m))
    out = (Out((n, m)),)
    search_inputs = ins(np.random.default_rng(1))
    configs = split_configs(n, m, trials=3)
    return [Port(TUTORIAL, "define_split: fastest of 3 random configs", "", ins, out,
                 lambda a, b: a.astype(np.float64) @ b,
                 lambda: fastest([matmul_polyloop(n, l_, m, *c) for c in configs],
                                 lambda s: polyloop_seconds(s, search_inputs)),
                 lambda tvm: fastest([matmul_tvm(tvm, n, l_, m, *c) for c in configs],
                                     lambda md: tvm_seconds(tvm, md, search_inputs, out)))]
