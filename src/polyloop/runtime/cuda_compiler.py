# SPDX-License-Identifier: Apache-2.0
"""Compile CUDA source to PTX, cached on disk by content like the C target's libraries.

``nvcc -ptx`` when nvcc is on the PATH, else NVRTC through ``cuda-bindings`` (the ``cuda``
extra). No GPU is needed: PTX is a virtual instruction set that the driver compiles for the
device when a module is loaded. The cache key is the SHA-256 of the source, the options and
the compiler's version; each entry holds ``kernel.cu`` and ``kernel.ptx``.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import BuildError
from ..util.process import ProcessTimeout, run_limited
from . import cache
from .compiler import STATS, _cache_key, _safe, _trim

# compute capability 8.0 (A100) and newer run this PTX (the driver JIT-compiles it)
DEFAULT_ARCH = "compute_80"
OPTIONS = ("-O3", "-std=c++17")
SOURCE_NAME = "kernel.cu"
PTX_NAME = "kernel.ptx"
INSTALL_HINT = ("install the CUDA toolkit (nvcc), or NVRTC (libnvrtc, e.g. the "
                "nvidia-cuda-nvrtc wheel) next to `pip install cuda-bindings` (the "
                "`polyloop[cuda]` extra)")


@dataclass(frozen=True, slots=True)
class Ptx:
    """Compiled PTX, the source it came from, and whether the cache had it."""
    text: str
    path: Path
    source_path: Path
    cache_hit: bool
    compiler: str


def compile_cuda(source: str, *, name: str, arch: str = DEFAULT_ARCH,
                 fast_math: bool = False) -> Ptx:
    """Compile CUDA ``source`` to PTX for virtual architecture ``arch``, or reuse the cached
    PTX. Raises BuildError with the compiler's message and the source path on failure.

    >>> ptx = compile_cuda('extern "C" __global__ void k(float *a) { a[0] = 1; }', name="k")
    ... # doctest: +SKIP
    >>> ".entry k" in ptx.text  # doctest: +SKIP
    True
    """
    options = OPTIONS + (f"-arch={arch}",) + (("--use_fast_math",) if fast_math else ())
    nvcc = shutil.which("nvcc")
    compiler = _nvcc_version(nvcc) if nvcc else _nvrtc_version()
    key = _cache_key(source, options, compiler)
    root = cache.safe_directory(config.CONFIG.cache_dir)
    entry = root / "cuda" / f"{_safe(name)}-{key[:24]}"
    source_path, ptx_path = entry / SOURCE_NAME, entry / PTX_NAME
    try:
        entry.parent.mkdir(mode=0o700, exist_ok=True)
        with cache.locked(entry):
            if cache.verified(ptx_path):
                STATS.cache_hits += 1
                return Ptx(ptx_path.read_text(), ptx_path, source_path, True, compiler)
            cache.write_atomic(source_path, source.encode(), 0o600)
            STATS.compiles += 1
            text = _run_nvcc(nvcc, options, source_path) if nvcc else \
                _run_nvrtc(source, options, source_path)
            tmp = cache.temp_path(entry, ".ptx")
            tmp.write_text(text)
            cache.install(tmp, ptx_path)
    except OSError as e:   # a full disk, a read-only cache
        raise BuildError(f"cannot write the kernel cache entry {entry}: {e.strerror}; point "
                         "POLYLOOP_CACHE_DIR at a writable directory") from None
    return Ptx(text, ptx_path, source_path, False, compiler)


def nvcc_available() -> tuple[bool, str]:
    """(True, version) when nvcc is on the PATH, else (False, why not)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return False, "nvcc is not on the PATH (install the CUDA toolkit)"
    return True, _nvcc_version(nvcc)


_VERSIONS: dict[str, str] = {}


def _nvcc_version(nvcc: str) -> str:
    if nvcc not in _VERSIONS:
        out = _run(nvcc, [nvcc, "--version"], None)
        lines = out.stdout.strip().splitlines()
        _VERSIONS[nvcc] = lines[-1] if lines else nvcc
    return _VERSIONS[nvcc]


def _run(nvcc: str, command: list[str], source_path: Path | None):
    timeout = config.CONFIG.compile_timeout
    try:
        return run_limited(command, timeout=timeout)
    except OSError as e:
        raise BuildError(f"cannot run nvcc '{nvcc}': {e.strerror}; " + INSTALL_HINT) from None
    except ProcessTimeout:
        what = f"compiling {source_path}" if source_path is not None else "nvcc --version"
        raise BuildError(f"nvcc did not finish within {timeout:g} s ({what}) and was stopped; "
                         "raise POLYLOOP_COMPILE_TIMEOUT for a very large kernel") from None


def _run_nvcc(nvcc: str, options: tuple[str, ...], source_path: Path) -> str:
    """PTX text; the caller holds the entry's lock (a stray temporary is removed by it)."""
    tmp = cache.temp_path(source_path.parent, ".ptx")
    command = [nvcc, "-ptx", *options, "-o", str(tmp), str(source_path)]
    try:
        result = _run(nvcc, command, source_path)
        if result.returncode != 0:
            raise BuildError(f"CUDA compilation failed (exit status {result.returncode}) for "
                             f"{source_path}\ncommand: {' '.join(command)}\n"
                             f"{_trim(result.stderr or result.stdout)}")
        text = tmp.read_text()
        if not text.strip():
            raise BuildError(f"nvcc reported success but wrote no PTX for {source_path}")
        return text
    finally:
        tmp.unlink(missing_ok=True)


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise BuildError("the CUDA target needs a CUDA compiler: " + INSTALL_HINT) from None
    return nvrtc


def _nvrtc_version() -> str:
    nvrtc = _nvrtc()
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:   # the bindings raise their own error when libnvrtc is missing
        raise BuildError(f"the CUDA target found neither nvcc nor NVRTC ({str(e).strip()}); "
                         + INSTALL_HINT) from None
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise BuildError(f"NVRTC cannot be loaded ({err}); " + INSTALL_HINT)
    return f"nvrtc {major}.{minor}"


def _run_nvrtc(source: str, options: tuple[str, ...], source_path: Path) -> str:
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), str(source_path).encode(), 0, [], [])
    if err != ok:
        raise BuildError(f"NVRTC could not create a program for {source_path}: {err}")
    flags = [o.replace("-arch=", "--gpu-architecture=").encode() for o in options
             if o != "-O3"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
    if err != ok:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise BuildError(f"CUDA compilation (NVRTC) failed for {source_path}\n"
                         f"{_trim(log.decode(errors='replace'))}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    nvrtc.nvrtcDestroyProgram(prog)
    return ptx.rstrip(b"\0").decode()


__all__ = ["Ptx", "compile_cuda", "nvcc_available", "DEFAULT_ARCH"]
