# SPDX-License-Identifier: Apache-2.0
"""The pieces of ``benchmarks/schedule_parity.py`` that its figures rest on, without TVM: the
aligned copies both tools get, the hand-written last step of the GEMM ladder (it must compute
the product, or the comparison with ``schedule_matmul`` means nothing) and the timer that calls
it. No timing assertions."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from polyloop.bench.peers import ALIGN

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "schedule_parity.py"


@pytest.fixture(scope="module")
def parity():
    spec = importlib.util.spec_from_file_location("schedule_parity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.mark.parametrize("shape", [(3, 5), (257,), (16, 128, 128)])
def test_aligned_copy_starts_on_the_boundary_and_keeps_the_values(parity, rng, shape):
    a = rng.random(shape, dtype=np.float32)
    b = parity.aligned(a)
    assert b.ctypes.data % ALIGN == 0
    assert b.shape == a.shape and b.dtype == a.dtype and b.flags.c_contiguous
    np.testing.assert_array_equal(b, a)
    assert not np.shares_memory(a, b)


def test_ladder_by_hand_computes_the_product(parity, rng):
    n = 96                                    # 3 tiles of 32, 24 k steps of 4
    a, b = (parity.aligned(rng.random((n, n), dtype=np.float32) - 0.5) for _ in range(2))
    out = parity.aligned(np.full((n, n), np.nan, np.float32))
    _, call = parity._hand_call(parity.HandC(parity.ladder_by_hand(n), "ladder_by_hand"))
    call(a, b, out)
    assert not np.isnan(out).any()            # every element written
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_ladder_by_hand_refuses_a_size_its_tiles_do_not_divide(parity):
    with pytest.raises(SystemExit, match="multiple of 32"):
        parity.ladder_by_hand(100)


def test_polyloop_timer_runs_the_hand_kernel_and_checks_it(parity, rng):
    n = 64
    case = next(c for c in parity.cases(n)["ladder"] if "by hand" in c.name)
    arrays = case.inputs(rng)
    measure = parity._polyloop_timer(case, arrays, threads=1, repeat=1)
    assert measure() > 0
