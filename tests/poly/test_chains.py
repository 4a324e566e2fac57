# SPDX-License-Identifier: Apache-2.0
"""Tiled chains as one isl band: time-tiled stencils with large tiles build within a small isl
operation budget, keep their loops' names and kinds, and compute what NumPy computes at sizes
the tiles do not divide (the sizes are symbolic, bound from the arrays)."""
from __future__ import annotations

import contextlib

import islpy as isl
import numpy as np
import pytest

import polyloop as pl
from polyloop.poly.hardware_ids import statement_domains
from polyloop.poly.isl_schedule import isl_schedule
from polyloop.poly.chains import join_chains
from polybench_scripts import heat_3d, jacobi_1d, jacobi_2d  # tests/ is on sys.path

# Jacobi-1D, tile 32: about 64 thousand isl operations to print as one band; 2 million when each
# loop was a band of its own (the wavefront's division left to isl's stride detection)
BUDGET = 400_000


@contextlib.contextmanager
def isl_budget(operations: int):
    """isl refuses (raises) past ``operations`` elementary steps inside the block."""
    ctx = isl.DEFAULT_CONTEXT
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        yield
    finally:
        ctx.set_max_operations(0)
        ctx.reset_operations()


@pytest.fixture(scope="module")
def jacobi_1d_32():
    return pl.auto_schedule(jacobi_1d, fusion="max", tile=32)


def test_time_tiled_jacobi_prints_within_an_isl_budget(jacobi_1d_32):
    with isl_budget(BUDGET):
        text = str(jacobi_1d_32)
    # the joined band keeps each loop's name and kind: the wavefront's tile loop is parallel
    assert "for t_0 in parallel(" in text
    for name in ("i_0", "t_1", "i_1"):
        assert f"for {name} in range(" in text


def _schedule(sch) -> isl.Schedule:
    program, root = sch.program, sch.state.root
    return isl_schedule(program, root, statement_domains(program, root, {}))


def test_the_wavefront_chain_is_one_band(jacobi_1d_32):
    sch = jacobi_1d_32
    tree = join_chains(_schedule(sch), sch.state.root)
    node, marks = tree.get_root().child(0), 0
    while node.get_type() == isl.schedule_node_type.mark:
        node, marks = node.child(0), marks + 1
    assert (marks, node.band_n_member()) == (4, 4)


def test_untiled_nest_keeps_one_band_per_loop():
    A = pl.placeholder((pl.var("n"), pl.var("m")), "float64", name="A")
    B = pl.compute(A.shape, lambda i, j: A[i, j] * 2.0, name="B")
    sch = pl.Schedule(B)
    tree = join_chains(_schedule(sch), sch.state.root)
    band = tree.get_root().child(0).child(0)
    assert band.band_n_member() == 1 and band.child(0).get_type() == isl.schedule_node_type.mark


def _jacobi_1d(a, b, steps):
    for _ in range(steps):
        b[1:-1] = 0.33333 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33333 * (b[:-2] + b[1:-1] + b[2:])


def _jacobi_2d(a, b, steps):
    for _ in range(steps):
        b[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                               + a[:-2, 1:-1])
        a[1:-1, 1:-1] = 0.2 * (b[1:-1, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:] + b[2:, 1:-1]
                               + b[:-2, 1:-1])


def _heat_3d(a, b, steps):
    def step(x, y):
        c = x[1:-1, 1:-1, 1:-1]
        y[1:-1, 1:-1, 1:-1] = (0.125 * (x[2:, 1:-1, 1:-1] - 2.0 * c + x[:-2, 1:-1, 1:-1])
                               + 0.125 * (x[1:-1, 2:, 1:-1] - 2.0 * c + x[1:-1, :-2, 1:-1])
                               + 0.125 * (x[1:-1, 1:-1, 2:] - 2.0 * c + x[1:-1, 1:-1, :-2]) + c)
    for _ in range(1, steps):
        step(a, b)
        step(b, a)


REFERENCES = {"jacobi_1d": _jacobi_1d, "jacobi_2d": _jacobi_2d, "heat_3d": _heat_3d}


@pytest.mark.parametrize("program, tile, shape, steps", [
    (jacobi_1d, 32, (75,), 41),
    (jacobi_2d, 64, (37, 37), 35),
    (heat_3d, 32, (13, 13, 13), 34),
], ids=["jacobi_1d-32", "jacobi_2d-64", "heat_3d-32"])
def test_time_tiled_stencil_matches_numpy(program, tile, shape, steps):
    mod = pl.build(pl.auto_schedule(program, fusion="max", tile=tile))
    rng = np.random.default_rng(0)
    arrays = [rng.random(shape), rng.random(shape)]
    got = [x.copy() for x in arrays]
    mod(*got, np.zeros(steps))       # the last argument only gives the number of time steps
    REFERENCES[program.name](*arrays, steps)
    for g, want in zip(got, arrays):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
