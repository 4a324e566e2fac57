# SPDX-License-Identifier: Apache-2.0
"""target="cuda" builds everywhere nvcc (or NVRTC) is: the source and the PTX are readable;
calling the module needs a CUDA device and says so clearly where there is none."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime import compiler
from polyloop.runtime.cuda import device_available
from polyloop.runtime.cuda_compiler import nvcc_available

NVCC, NVCC_WHY = nvcc_available()
DEVICE, DEVICE_WHY = device_available()
pytestmark = pytest.mark.skipif(not NVCC, reason=f"CUDA compile check skipped: {NVCC_WHY}")


def doubling():
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    return pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")


def test_build_gives_source_and_ptx_and_caches_the_ptx(fresh_cache):
    before = compiler.STATS.compiles
    mod = pl.build(doubling(), target="cuda")
    assert mod.target == "cuda" and ".entry loopy_kernel" in mod.ptx
    assert "__global__" in mod.source
    again = pl.build(doubling(), target="cuda")
    assert again.ptx == mod.ptx and compiler.STATS.compiles == before + 1
    assert list(fresh_cache.glob("cuda/*/kernel.ptx"))


def test_a_compile_error_shows_the_compiler_message(fresh_cache):
    from polyloop.runtime.cuda_compiler import compile_cuda
    with pytest.raises(pl.BuildError, match=r"CUDA compilation failed .*kernel\.cu"):
        compile_cuda('extern "C" __global__ void k() { undeclared = 1; }', name="broken")


@pytest.mark.skipif(DEVICE, reason="a CUDA device is present")
def test_calling_without_a_device_raises_device_error():
    mod = pl.build(doubling(), target="cuda")
    with pytest.raises(pl.DeviceError, match="no CUDA device found"):
        mod(np.ones(5, "float32"))


@pytest.mark.skipif(not DEVICE, reason=f"no CUDA device: {DEVICE_WHY}")
def test_runs_on_numpy_arrays_when_a_device_is_present(rng):
    mod = pl.build(doubling(), target="cuda")
    a = rng.standard_normal(1000, dtype="float32")
    out = np.full(1000, np.nan, "float32")
    mod(a, out)
    np.testing.assert_array_equal(out, 2 * a)
    assert mod.benchmark(a, out, repeat=2) > 0


def test_without_nvcc_nvrtc_compiles_or_the_error_says_how_to_get_a_compiler(monkeypatch,
                                                                             fresh_cache):
    from polyloop.runtime import cuda_compiler
    monkeypatch.setattr(cuda_compiler.shutil, "which", lambda name: None)
    source = 'extern "C" __global__ void k(float *a) { a[0] = 1.0f; }'
    try:
        ptx = cuda_compiler.compile_cuda(source, name="k")
    except pl.BuildError as e:
        # without cuda-bindings, or with the bindings but no libnvrtc: either way it says how
        assert ("neither nvcc nor NVRTC" in str(e) or "needs a CUDA compiler" in str(e))
        assert "pip install cuda-bindings" in str(e)
    else:
        assert ".entry k" in ptx.text and ptx.compiler.startswith("nvrtc")
