# SPDX-License-Identifier: Apache-2.0
"""The reference implementations polyloop is timed against: NumPy, PyTorch CPU and Apache TVM.

PyTorch and TVM are optional (the ``bench`` extra); each is imported when first asked for, and a
missing one is reported as "not installed" rather than failing. PyTorch and TVM run on ``threads`` threads,
as polyloop's OpenMP code does. TVM's thread pool counts half the logical CPUs on x86 (it
assumes two hardware threads per core), so its size is given before TVM starts it. Every tool
reads the same inputs, copied to 64-byte boundaries (``aligned_copy``) as TVM copies its own.

>>> from polyloop.bench.peers import time_call
>>> seconds = time_call(lambda: sum(range(100)), repeat=3)
>>> seconds > 0
True
"""
from __future__ import annotations

import functools
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np

from ..util.aligned import aligned_bytes

NOT_INSTALLED = "not installed"
ALIGN = 64      # bytes: a cache line, and a whole AVX-512 vector


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` whose data starts on an ``ALIGN``-byte boundary (NumPy aligns large
    arrays to 16 bytes only, so a vector load may straddle two cache lines).

    >>> import numpy as np
    >>> b = aligned_copy(np.arange(5.0))
    >>> b.ctypes.data % ALIGN, b.tolist()
    (0, [0.0, 1.0, 2.0, 3.0, 4.0])
    """
    out = aligned_bytes(a.nbytes, ALIGN).view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def time_call(fn: Callable[[], object], *, repeat: int, warmup: int = 2,
              min_time: float = 1e-3, stat: str = "median") -> float:
    """Median (or, with ``stat="min"``, least) seconds of one ``fn()``, measured as
    ``Module.benchmark`` measures a kernel: after ``warmup`` calls, ``repeat`` timings of
    enough calls to last ``min_time`` each."""
    for _ in range(warmup):
        fn()
    number, start = 0, time.perf_counter()
    while number == 0 or time.perf_counter() - start < min_time:
        fn()
        number += 1
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times) if stat == "min" else statistics.median(times)


@dataclass(frozen=True, slots=True)
class Peer:
    """An optional reference library: its module, or why it is unavailable."""

    name: str
    module: Any | None
    version: str

    @property
    def available(self) -> bool:
        return self.module is not None


@functools.cache
def load_torch(threads: int) -> Peer:
    """PyTorch on ``threads`` intra-op threads, or a Peer saying it is not installed."""
    try:
        import torch
    except ImportError:
        return Peer("torch", None, NOT_INSTALLED)
    torch.set_num_threads(threads)
    return Peer("torch", torch, torch.__version__)


@functools.cache
def load_tvm(threads: int) -> Peer:
    """Apache TVM with a pool of ``threads`` unpinned threads (as OpenMP's), or a Peer saying
    it is not installed (or not importable)."""
    os.environ.setdefault("TVM_NUM_THREADS", str(threads))
    os.environ.setdefault("TVM_BIND_THREADS", "0")
    try:
        import tvm
    except Exception as e:  # noqa: BLE001 - a broken TVM install is reported, never fatal
        why = NOT_INSTALLED if isinstance(e, ImportError) else f"unusable ({type(e).__name__})"
        return Peer("tvm", None, why)
    try:
        version = metadata.version("apache-tvm")
    except metadata.PackageNotFoundError:
        version = getattr(tvm, "__version__", "?")
    return Peer("tvm", tvm, version)
