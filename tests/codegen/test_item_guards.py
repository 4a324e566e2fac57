# SPDX-License-Identifier: Apache-2.0
"""OpenCL kernels with barriers never branch on a work-item id around a loop (PoCL 3.x
mistranslates that form: wrong stores now and then, or a crash); the guard moves into the loop
bodies, and the kernels still compute NumPy's results with every output written."""
from __future__ import annotations

import re

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops
from polyloop.codegen.item_guards import sink_item_guards
from polyloop.ir.dtypes import INDEX
from polyloop.ir.expr import Load, Var, as_expr
from polyloop.ir.loops import Barrier, Block, For, If, Kernel, LoopKind, Store, iter_nodes
from polyloop.ir.thread_axis import ThreadAxis
from polyloop.runtime.opencl import platform_available

OPENCL, OPENCL_WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
J, I = Var("j"), Var("i")
ZERO, TWO, LANES = as_expr(0), as_expr(2), as_expr(32)


def _kernel(guarded, *, barrier=True):
    items = (Barrier(), guarded) if barrier else (guarded,)
    body = For("j", ZERO, LANES, Block(items), LoopKind.THREAD, thread=ThreadAxis.THREAD_X)
    return Kernel("k", (), (), (), body)


def _guard_above_loop(kernel):
    return any(isinstance(n, If) and any(isinstance(x, For) for x in iter_nodes(n.then))
               for n in iter_nodes(kernel.body))


def test_guard_on_an_item_id_moves_into_the_loop():
    loop = For("i", ZERO, TWO, Block((Store("c", (I, J), J), Store("d", (I, J), I))))
    sunk = sink_item_guards(_kernel(If(J < 16, loop)))
    assert not _guard_above_loop(sunk)
    inner = sunk.body.body.body[1]
    assert isinstance(inner, For) and isinstance(inner.body, If)
    assert isinstance(inner.body.then, Block)       # one test around the loop-free statements


def test_kernels_without_barriers_and_guards_on_sizes_are_left_alone():
    loop = For("i", ZERO, TWO, Store("c", (I, J), J))
    assert _guard_above_loop(sink_item_guards(_kernel(If(J < 16, loop), barrier=False)))
    assert _guard_above_loop(sink_item_guards(_kernel(If(Var("N") > 3, loop))))


def test_a_loop_bound_that_reads_memory_keeps_its_guard():
    # the guard keeps ptr[j + 1] in range: the loop must not be evaluated without it
    bounded = For("i", Load("ptr", (J,), INDEX), Load("ptr", (J + 1,), INDEX),
                  Store("c", (I,), J))
    assert _guard_above_loop(sink_item_guards(_kernel(If(J < 16, bounded))))


@needs_opencl
def test_tensor_core_kernel_runs_repeatedly_with_every_output_written(rng):
    # the copy out of c ran 32 lanes under a guard on the column around two loops: on PoCL
    # that form crashed the process or stored another work-group's values
    mod = pl.build(ops.matmul_tensorcore(dtype="float16"), target="opencl")
    ids = r"(j_inner\w*|i_inner\w*|a_dim\w*|b_dim\w*)"
    assert not re.search(rf"if \([^\n]*{ids}[^\n]*\) {{\n\s*for \(", mod.source)
    for m, n, k in [(70, 84, 37), (1, 1, 1), (65, 97, 33)] * 4:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.full((m, n), np.nan, np.float32)
        mod(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32),
                                   rtol=1e-5, atol=1e-4)
