# SPDX-License-Identifier: Apache-2.0
"""run_limited: a program past its time limit is killed with every process it started."""
from __future__ import annotations

import os
import time

import pytest

from polyloop.util.process import ProcessTimeout, run_limited


def test_output_and_status_come_back():
    done = run_limited(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_a_hanging_program_and_its_children_are_killed(tmp_path):
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    with pytest.raises(ProcessTimeout, match="did not finish within 0.5 s"):
        run_limited(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], timeout=0.5)
    assert time.monotonic() - start < 20
    child = int(pid_file.read_text())
    for _ in range(100):   # the kill is delivered; the zombie is reaped by init
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if _zombie(child):
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"the grandchild {child} still runs")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_a_missing_program_raises_oserror():
    with pytest.raises(OSError):
        run_limited(["/nonexistent/program"], timeout=5)
