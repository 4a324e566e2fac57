# SPDX-License-Identifier: Apache-2.0
"""Without an OpenCL platform (or without PyOpenCL), building for OpenCL says how to get one.
These tests fake the missing pieces, so they run everywhere."""
from __future__ import annotations

import pytest

import polyloop as pl
import polyloop.runtime.opencl as rt


def kernel():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    return pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")


class NoPlatforms:
    class Error(Exception):
        pass

    @staticmethod
    def get_platforms():
        raise NoPlatforms.Error("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")


def test_no_platform_error_says_how_to_install_one(monkeypatch):
    monkeypatch.setattr(rt, "_cl", lambda: NoPlatforms)
    monkeypatch.setattr(rt, "_DEFAULT", {})
    with pytest.raises(pl.BuildError, match="no OpenCL platform with a device was found; install "
                       "one with `pip install pyopencl pocl-binary-distribution`"):
        pl.build(kernel(), target="opencl")
    available, why = rt.platform_available()
    assert not available and "pocl-opencl-icd" in why


def test_missing_pyopencl_names_the_extra(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pyopencl(name, *args, **kwargs):
        if name == "pyopencl" or name.startswith("pyopencl."):
            raise ImportError("No module named 'pyopencl'")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_pyopencl)
    monkeypatch.setattr(rt, "_DEFAULT", {})
    with pytest.raises(pl.BuildError, match=r"needs PyOpenCL .*polyloop\[opencl\]"):
        pl.build(kernel(), target="opencl")


def test_unknown_target_lists_the_valid_ones():
    with pytest.raises(pl.PolyloopError, match="valid targets: c, opencl"):
        pl.build(kernel(), target="metal")
