# SPDX-License-Identifier: Apache-2.0
"""POLYLOOP_NUM_THREADS: read once by config, applied to OpenMP when a module is loaded."""
from __future__ import annotations

import ctypes
import ctypes.util

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
