# SPDX-License-Identifier: Apache-2.0
"""The reference implementations polyloop is timed against: NumPy, PyTorch CPU and Apache TVM.

PyTorch and TVM are optional (the ``bench`` extra); each is imported when first asked for, and a
missing one is reported as "not installed" rather than failing. PyTorch runs on 2 threads (the
cores polyloop's OpenMP code uses on the reference machine; ``threads`` sets it).

>>> from polyloop.bench.peers import time_call
>>> seconds = time_call(lambda: sum(range(100)), repeat=3)
>>> seconds > 0
True
"""
from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

NOT_INSTALLED = "not installed"


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
def load_tvm() -> Peer:
    """Apache TVM, or a Peer saying it is not installed (or not importable)."""
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
