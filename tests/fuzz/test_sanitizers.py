# SPDX-License-Identifier: Apache-2.0
"""A sample of the fuzz corpus (and the schedules that once accessed memory outside an array)
compiled with -fsanitize=address,undefined and run in a subprocess: any AddressSanitizer or
UndefinedBehaviorSanitizer report fails the test. Python itself is not instrumented, so the
sanitizer runtimes are preloaded (libstdc++ too: isl's C++ exceptions need the real
``__cxa_throw`` when ASan intercepts it)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polyloop.config import CONFIG

TESTS = Path(__file__).resolve().parents[1]
SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"


def runtime(name: str) -> str | None:
    """The path of a gcc runtime library, or None when the compiler does not ship it."""
    try:
        out = subprocess.run([CONFIG.cc, f"-print-file-name={name}"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out if os.path.isabs(out) and os.path.exists(out) else None


def test_fuzz_sample_has_no_sanitizer_report(tmp_path):
    asan, stdcxx = runtime("libasan.so"), runtime("libstdc++.so")
    if asan is None or stdcxx is None:
        pytest.skip(f"{CONFIG.cc} has no AddressSanitizer runtime (libasan)")
    env = dict(os.environ, LD_PRELOAD=f"{asan} {stdcxx}", POLYLOOP_CFLAGS=SANITIZE,
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1", POLYLOOP_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(TESTS), *sys.path]))
    count = CONFIG.fuzz_examples or 2
    proc = subprocess.run([sys.executable, "-m", "fuzz.sanitize_sample", str(count), "1"],
                          cwd=TESTS, env=env, capture_output=True, text=True, timeout=600)
    report = proc.stdout[-3000:] + proc.stderr[-6000:]
    assert proc.returncode == 0, report
    assert "runtime error" not in proc.stderr and "Sanitizer" not in proc.stderr, report
    assert proc.stdout.count("ok ") == count + 5
