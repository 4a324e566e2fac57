# SPDX-License-Identifier: Apache-2.0
"""Run an external program (a compiler, a profiler) with a time limit.

A compiler that hangs must not hang the caller: the program runs in its own process group, and
when the limit passes the whole group is killed (gcc's own children, cc1 and as, included)
before ``ProcessTimeout`` is raised.
"""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class ProcessTimeout(Exception):
    """The program ran past its time limit and was killed."""

    def __init__(self, command: Sequence[str], seconds: float) -> None:
        super().__init__(f"{command[0]} did not finish within {seconds:g} s")
        self.command = tuple(command)
        self.seconds = seconds


@dataclass(frozen=True, slots=True)
class Completed:
    """Exit status and captured output of a finished program."""

    returncode: int
    stdout: str
    stderr: str


def run_limited(command: Sequence[str], *, timeout: float,
                env: Mapping[str, str] | None = None) -> Completed:
    """Run ``command`` to completion, capturing its output as text, or kill it after ``timeout``
    seconds and raise ProcessTimeout. OSError (program not found) propagates.

    >>> run_limited(["true"], timeout=10).returncode
    0
    """
    proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, errors="replace",
                            start_new_session=True, env=None if env is None else dict(env))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProcessTimeout(command, timeout) from None
    except BaseException:   # KeyboardInterrupt: leave no compiler running behind
        _kill_group(proc)
        raise
    return Completed(proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()
