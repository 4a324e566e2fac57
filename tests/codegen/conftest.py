# SPDX-License-Identifier: Apache-2.0
"""Compile generated C with gcc and call it through ctypes, as the runtime will."""
from __future__ import annotations

import ctypes
import itertools
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pytest

from polyloop.codegen import generate_c
from polyloop.ir.loops import Kernel

CFLAGS = ["-O3", "-march=native", "-fopenmp", "-std=gnu11", "-fPIC", "-shared"]
_counter = itertools.count()


@pytest.fixture(autouse=True, scope="session")
def _need_gcc() -> None:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")


@pytest.fixture
def compile_c(tmp_path: Path) -> Callable[..., tuple[Path, str]]:
    """compile_c(source, flags=()) -> (path of the shared library, gcc's diagnostics)."""
    def compile(source: str, flags: Sequence[str] = ()) -> tuple[Path, str]:
        stem = f"kernel{next(_counter)}"
        src, lib = tmp_path / f"{stem}.c", tmp_path / f"{stem}.so"
        src.write_text(source)
        result = subprocess.run(["gcc", *CFLAGS, *flags, str(src), "-o", str(lib), "-lm"],
                                capture_output=True, text=True)
        assert result.returncode == 0, f"gcc failed:\n{result.stderr}\n--- source ---\n{source}"
        return lib, result.stderr
    return compile


@pytest.fixture
def run_kernel(compile_c: Callable[..., tuple[Path, str]]) -> Callable[..., int]:
    """run_kernel(kernel, arrays, params) compiles the kernel and calls it on NumPy arrays."""
    def run(kernel: Kernel, arrays: Sequence[np.ndarray], params: Sequence[int] = ()) -> int:
        for a in arrays:
            assert a.flags.c_contiguous
        lib = ctypes.CDLL(str(compile_c(generate_c(kernel))[0]))
        fn = getattr(lib, kernel.name)
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        args = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        values = (ctypes.c_int64 * max(1, len(params)))(*params)
        return fn(args, values)
    return run


@pytest.fixture
def build(compile_c: Callable[..., tuple]) -> Callable[..., tuple[Callable[..., None], str]]:
    """build(kernel, isa=None) -> (call(arrays, params), C source), compiled for ``isa``."""
    def compile_for(kernel: Kernel, isa=None) -> tuple[Callable[..., None], str]:
        source = generate_c(kernel, isa=isa)
        fn = getattr(ctypes.CDLL(str(compile_c(source)[0])), kernel.name)
        fn.restype = ctypes.c_int32

        def call(arrays: Sequence[np.ndarray], params: Sequence[int] = ()) -> None:
            args = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
            values = (ctypes.c_int64 * max(1, len(params)))(*params)
            assert fn(args, values) == 0
        return call, source
    return compile_for
