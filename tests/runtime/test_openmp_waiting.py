# SPDX-License-Identifier: Apache-2.0
"""How OpenMP threads wait: passively unless the user chose, set before the OpenMP runtime
starts (a fresh process: this one has started it long ago)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from polyloop.runtime.openmp import _running

PROGRAM = """
import os, numpy as np, polyloop as pl
n = pl.var("n")
A = pl.placeholder((n,), "float32", name="A")
pl.build(pl.compute((n,), lambda i: A[i] + 1.0, name="B"))(np.ones(3, "float32"))
print(os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.mark.parametrize("given, seen", [({}, "passive"), ({"OMP_WAIT_POLICY": "active"}, "active"),
                                         ({"GOMP_SPINCOUNT": "1000"}, "None")])
def test_threads_wait_passively_unless_the_user_chose(given, seen, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(given, POLYLOOP_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == seen


def test_a_loaded_library_is_seen_as_running():
    assert _running("libc.so.6") and not _running("libpolyloop-no-such-library.so")
