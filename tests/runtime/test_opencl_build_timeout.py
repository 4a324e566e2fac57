# SPDX-License-Identifier: Apache-2.0
"""An OpenCL driver build that does not finish stops ``pl.build`` at POLYLOOP_COMPILE_TIMEOUT
with a BuildError that says so (the driver's build is replaced by one that waits; no real
long wait), and a build that finishes in time behaves as before."""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.runtime import opencl
from polyloop.runtime.opencl import platform_available

AVAILABLE, WHY = platform_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"OpenCL unavailable: {WHY}")


def doubled():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    return pl.compute((n,), lambda i: A[i] * 2.0 + 3.0, name="B")


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG,
                                                              compile_timeout=0.3))


def test_a_hanging_driver_build_is_abandoned_with_a_build_error(monkeypatch, short_timeout):
    release = threading.Event()
    started = threading.Event()

    def hanging(cl, context, source, cache_dir):
        started.set()
        release.wait(20)        # a driver that does not finish (until the test lets it go)
        raise RuntimeError("released")
    monkeypatch.setattr(opencl, "driver_build", hanging)
    start = time.monotonic()
    try:
        with pytest.raises(pl.BuildError, match=r"did not finish building .* within 0\.3 s.*"
                                                r"raise POLYLOOP_COMPILE_TIMEOUT"):
            pl.build(doubled(), target="opencl")
        assert started.is_set()
        assert time.monotonic() - start < 10
    finally:
        release.set()


def test_a_device_whose_probe_build_hangs_is_not_chosen(monkeypatch, short_timeout):
    release = threading.Event()

    def hanging(cl, context, source, cache_dir):
        release.wait(20)
        raise RuntimeError("released")
    monkeypatch.setattr(opencl, "driver_build", hanging)
    monkeypatch.setattr(opencl, "_DEFAULT", {})     # no queue chosen yet in this process
    try:
        with pytest.raises(pl.BuildError, match=r"no OpenCL device here can build a kernel.*"
                                                r"did not finish building 'polyloop_probe'"):
            opencl.default_queue()
    finally:
        release.set()


def test_a_build_within_the_time_limit_runs(monkeypatch, short_timeout):
    real = opencl.driver_build
    calls = []

    def counted(cl, context, source, cache_dir):
        calls.append(threading.current_thread().name)
        return real(cl, context, source, cache_dir)
    monkeypatch.setattr(opencl, "driver_build", counted)
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG,
                                                              compile_timeout=120.0))
    mod = pl.build(doubled(), target="opencl")
    assert calls and calls[0].startswith("polyloop OpenCL build")
    a = np.random.default_rng(0).uniform(-1, 1, 37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 3, rtol=1e-6)


def test_a_rejected_source_is_still_reported_with_the_compiler_message():
    with pytest.raises(pl.BuildError, match="the OpenCL compiler rejected the generated code"):
        opencl.OpenCLModule("__kernel void k(__global float *a) { a[0] = undeclared; }",
                            entry="k", args=(), params=(), scratch=(), launches=())
