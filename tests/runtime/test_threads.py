# SPDX-License-Identifier: Apache-2.0
"""POLYLOOP_NUM_THREADS: read once by config, applied to OpenMP when a module is loaded."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys

import pytest

from polyloop import config
from polyloop.runtime.module import apply_thread_count


@pytest.mark.parametrize("text, want", [("3", 3), (" 2 ", 2), ("", None), ("0", None),
                                        ("-1", None), ("four", None)])
def test_thread_count_is_read_from_the_environment(monkeypatch, text, want):
    monkeypatch.setenv("POLYLOOP_NUM_THREADS", text)
    if want is None and text.strip():
        with pytest.warns(RuntimeWarning, match="POLYLOOP_NUM_THREADS"):
            assert config.load().num_threads is None
    else:
        assert config.load().num_threads == want


def test_thread_count_reaches_the_openmp_runtime():
    path = ctypes.util.find_library("gomp")
    if path is None:
        pytest.skip("libgomp not found by ctypes")
    gomp = ctypes.CDLL(path)
    before = gomp.omp_get_max_threads()
    try:
        assert apply_thread_count(gomp, 1)
        assert gomp.omp_get_max_threads() == 1
    finally:
        gomp.omp_set_num_threads(before)
    assert not apply_thread_count(gomp, None)
    image = ctypes.CDLL(None)
    # a library loaded globally earlier in this process (torch, in the graph tests) may have
    # put OpenMP in the process image; only without it is there nothing to set
    if not hasattr(image, "omp_set_num_threads"):
        assert not apply_thread_count(image, 2)


@pytest.mark.parametrize("text", ["100000", "4294967297", "99999999999999999999"])
def test_a_huge_thread_count_is_clamped_with_a_warning(monkeypatch, text):
    monkeypatch.setenv("POLYLOOP_NUM_THREADS", text)
    with pytest.warns(RuntimeWarning, match="POLYLOOP_NUM_THREADS.*threads are used"):
        assert config.load().num_threads == config.max_threads()


def test_a_huge_thread_count_given_in_code_is_clamped_too():
    path = ctypes.util.find_library("gomp")
    if path is None:
        pytest.skip("libgomp not found by ctypes")
    gomp = ctypes.CDLL(path)
    before = gomp.omp_get_max_threads()
    try:
        assert apply_thread_count(gomp, 100_000)
        assert gomp.omp_get_max_threads() == config.max_threads()
    finally:
        gomp.omp_set_num_threads(before)


HUGE_THREADS = """
import warnings
import numpy as np, polyloop as pl
warnings.simplefilter("ignore")
n = pl.var("n")
A = pl.placeholder((n,), "float32", name="A")
B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
sch = pl.Schedule(B)
sch.parallel(sch.get_loops(sch.get_block("B"))[0])
a = np.arange(1000, dtype="float32")
assert np.array_equal(pl.build(sch)(a), a * 2)
"""


def test_a_parallel_kernel_runs_under_a_huge_thread_count(tmp_path):
    env = dict(os.environ, POLYLOOP_NUM_THREADS="100000", POLYLOOP_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", HUGE_THREADS], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
