# SPDX-License-Identifier: Apache-2.0
"""Loading compiled kernels, and how their OpenMP threads wait.

A parallel region ends when its last thread has finished. By default GNU OpenMP lets a thread
that waits (for the others, or for the next region) spin for a while, burning its share of a
core; on a machine other processes share, a spinning thread is descheduled as often as a
working one, and a region then waits for a thread to get a core back, at every region: a
kernel with hundreds of regions ran 10 to 30 times slower than with one thread. Threads that
sleep while they wait (``OMP_WAIT_POLICY=passive``) degrade gracefully: the same kernels kept
most of their parallel speed on a loaded machine, at the cost of a few microseconds to wake
the threads at each region on an idle one (``benchmarks/bench_polybench.py``).

So unless the user has chosen (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` set), polyloop asks
for passive waiting before the OpenMP runtime starts in the process, that is before the first
compiled kernel is loaded. When the runtime is already running (another library started it),
its settings stay.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from .. import config

OPENMP_RUNTIME = "libgomp.so.1"


def load_library(path: Path | str) -> ctypes.CDLL:
    """``ctypes.CDLL(path)``, with the OpenMP runtime told how to wait first (see above)."""
    if config.CONFIG.omp_waiting is None and not _running(OPENMP_RUNTIME):
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    return ctypes.CDLL(str(path))


def _running(name: str) -> bool:
    """Whether the shared library ``name`` is already loaded in this process."""
    try:
        ctypes.CDLL(name, mode=getattr(os, "RTLD_NOLOAD", 4) | ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    return True
