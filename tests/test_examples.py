# SPDX-License-Identifier: Apache-2.0
"""The programs in examples/ run to completion (each checks itself against NumPy)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"matmul_relu.py": ["37"], "stencil_auto.py": ["23", "3"], "opencl_kernel.py": ["33"]}


def test_every_example_is_listed():
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_runs(name):
    if name == "opencl_kernel.py":
        pytest.importorskip("pyopencl", reason="the OpenCL example needs PyOpenCL")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"),
                                                       os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / name), *SMALL[name]],
                          capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "equal to NumPy" in done.stdout
