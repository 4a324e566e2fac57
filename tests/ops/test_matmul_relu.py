# SPDX-License-Identifier: Apache-2.0
"""ops.matmul_relu and its schedule (the one ``polyloop demo`` runs) against NumPy, at sizes that
divide no tile and at symbolic sizes; outputs are passed in filled with NaN."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import ops


def run(mod, a, b):
    out = np.full((a.shape[0], b.shape[1]), np.nan, dtype=np.float32)
    mod(a, b, out)
    return out


def inputs(rng, m, n, k):
    return (rng.standard_normal((m, k), dtype=np.float32),
            rng.standard_normal((k, n), dtype=np.float32))


@pytest.mark.parametrize("m, n, k, knobs", [(37, 45, 29, {}), (1, 1, 1, {}),
                                            (13, 70, 9, dict(mr=4, nr_vectors=1, lanes=8))])
def test_matmul_relu_matches_numpy(rng, m, n, k, knobs):
    A = pl.placeholder((m, k), "float32", name="A")
    B = pl.placeholder((k, n), "float32", name="B")
    mod = pl.build(ops.schedule_matmul_relu(ops.matmul_relu(A, B), **knobs))
    a, b = inputs(rng, m, n, k)
    np.testing.assert_allclose(run(mod, a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_matmul_relu_symbolic_sizes_one_module_for_all(rng):
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    mod = pl.build(ops.schedule_matmul_relu(ops.matmul_relu(A, B)))
    for size in (1, 7, 33):
        a, b = inputs(rng, size, size, size)
        np.testing.assert_allclose(run(mod, a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_the_relu_is_applied_as_tiles_are_written_back():
    A, B = pl.placeholder((16, 8), name="A"), pl.placeholder((8, 32), name="B")
    sch = ops.schedule_matmul_relu(ops.matmul_relu(A, B), mr=4, nr_vectors=1, lanes=8)
    assert "D" not in [s.block_name for s in sch.program.statements]   # no separate ReLU pass
    assert "max(" in str(sch)


def test_schedule_matmul_relu_refuses_other_tensors():
    A, B = pl.placeholder((4, 3), name="A"), pl.placeholder((3, 5), name="B")
    with pytest.raises(pl.ScheduleError, match="schedule_matmul_relu: expected the result"):
        ops.schedule_matmul_relu(ops.matmul(A, B))
