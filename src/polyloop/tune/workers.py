# SPDX-License-Identifier: Apache-2.0
"""Worker processes for tuning: ``python -m polyloop.tune.worker``, one socket each.

A worker is a fresh Python running polyloop's own worker module, not a copy of the tuner's
process: the user's script is never imported again, so tuning works from a script without an
``if __name__ == "__main__":`` guard, from ``python -c``, a notebook or an interactive
session (``multiprocessing``'s "spawn" runs the main script again in every worker, and "fork"
copies threads and locks it cannot copy safely). What crosses the process boundary is data:
the program, the schedule's trace, the compiled kernel's spec, the inputs, the settings
(``config.CONFIG``), ``sys.path`` (so that modules the program's classes come from import the
same way) and the tensor intrinsics registered by name in this process.

When a worker dies, ``WorkerProcess.death`` says how: the signal or exit status, and the last
lines it wrote.
"""
from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Iterable

from .. import config
from ..schedule.intrin_registry import registered_intrinsics

_LAST_OUTPUT = 1500          # characters of a dead worker's output shown in its error
_POLYLOOP_ROOT = str(Path(__file__).resolve().parents[2])   # the directory holding polyloop/


class WorkerProcess:
    """One worker process and the connection to it (messages are pickled tuples).

    >>> w = WorkerProcess()                          # doctest: +SKIP
    >>> w.send(("build", job)); w.recv()             # doctest: +SKIP
    """

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        self._output = tempfile.TemporaryFile()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_POLYLOOP_ROOT, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "polyloop.tune.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=self._output,
                stderr=subprocess.STDOUT, env=env, close_fds=True)
        finally:
            theirs.close()
        self.conn = Connection(mine.detach())
        self.conn.send(("path", [p for p in sys.path if isinstance(p, str)]))
        self.conn.send(("setup", config.CONFIG, _intrinsics()))

    def send(self, message: tuple) -> None:
        self.conn.send(message)

    def recv(self) -> Any:
        return self.conn.recv()

    def poll(self, timeout: float) -> bool:
        return self.conn.poll(timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def death(self, what: str) -> str:
        """How the worker ended, its last output, and what to do, in words."""
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            how = "closed its connection but is still running"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
        else:
            how = f"exited with status {code}"
        tail = self.last_output()
        shown = f"; its last output:\n{tail}" if tail else "; it wrote nothing"
        return (f"the {what} worker process (pid {self.proc.pid}) {how}{shown}\n"
                f"A crash in a {what} is a bug in polyloop or in C code the program brings "
                "(an extern function, a tensor intrinsic): please report it with the trace; "
                "the tuner records this candidate as failed and goes on.")

    def last_output(self) -> str:
        try:
            self._output.seek(0, os.SEEK_END)
            size = self._output.tell()
            self._output.seek(max(0, size - _LAST_OUTPUT))
            return self._output.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        """End the process now (a stuck build never answers)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send(("stop",))
            except (OSError, ValueError):
                pass
            try:
                self.proc.wait(5.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5.0)
        self.conn.close()
        self._output.close()


def ready(workers: Iterable[WorkerProcess], timeout: float) -> list[WorkerProcess]:
    """The workers with an answer (or a closed connection) within ``timeout`` seconds."""
    by_conn = {id(w.conn): w for w in workers}
    conns = [w.conn for w in by_conn.values()]
    return [by_conn[id(c)] for c in wait(conns, timeout=timeout)]  # type: ignore[arg-type]


def _intrinsics() -> list[bytes]:
    """The tensor intrinsics registered in this process, each pickled on its own (a trace
    names an intrinsic; the worker registers them again). One that cannot be pickled is left
    out: a trace naming it then fails to build, with the registry's error."""
    out = []
    for intrin in registered_intrinsics():
        try:
            out.append(pickle.dumps(intrin))
        except Exception:   # noqa: BLE001 - whatever pickling raises, the others still go
            continue
    return out
