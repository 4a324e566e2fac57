# SPDX-License-Identifier: Apache-2.0
"""Devices for the RPC tests: the C server cross-compiled for aarch64 (or riscv64) and run
under qemu-user on loopback, the C server built for this machine (the fuzzer's target, with
the sanitizers), and the Python server, each started as a process of its own on a free port.

A test needing a tool that is missing (a cross compiler, qemu-user) is skipped with the
package that provides it; CI installs them (``.ci/run``).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from polyloop import rpc
from polyloop.config import CONFIG
from polyloop.rpc.protocol import RemoteError

QEMU = {"aarch64-linux-gnu": "qemu-aarch64", "riscv64-linux-gnu": "qemu-riscv64",
        "arm-linux-gnueabihf": "qemu-arm"}
_LISTENING = re.compile(r"listening on (\S+):(\d+), work directory ([^,\n]+)")


def require_cross_compiler(triple: str) -> None:
    """Skip the test when ``<triple>-gcc`` (or POLYLOOP_CC_<TRIPLE>) is not installed."""
    cc = CONFIG.cc_for(triple)
    if shutil.which(cc) is None:
        pytest.skip(f"the cross compiler {cc} is not installed (Debian: apt-get install "
                    f"gcc-{triple}); .ci/run installs it in CI")


def require_qemu(triple: str) -> None:
    """Skip the test when qemu-user cannot run ``triple`` programs here."""
    require_cross_compiler(triple)
    if shutil.which(QEMU[triple]) is None:
        pytest.skip(f"{QEMU[triple]} is not installed (Debian: apt-get install qemu-user); "
                    ".ci/run installs it in CI")
    if not Path(f"/usr/{triple}/lib").is_dir():
        pytest.skip(f"the {triple} C library (/usr/{triple}/lib) is missing; it comes with "
                    f"gcc-{triple}")


@dataclass
class Server:
    """A running RPC server process (its process group is killed by ``stop``)."""

    proc: subprocess.Popen
    host: str
    port: int
    work_dir: Path | None = None

    def stop(self) -> str:
        """Kill the server and everything it started; its standard error."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = self.proc.communicate(timeout=30)
        return err


def start(command: list[str], env: dict | None = None) -> Server:
    """Start a server that prints ``listening on HOST:PORT`` once ready (``--port 0``)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    line = proc.stdout.readline()
    found = _LISTENING.search(line)
    if found is None:
        err = proc.stderr.read() if proc.poll() is not None else ""
        Server(proc, "", 0).stop()
        raise RuntimeError(f"the server did not start: {line!r} {err[-2000:]}")
    return Server(proc, found[1], int(found[2]), Path(found[3]))


def qemu_command(triple: str, binary: Path, *args: str) -> list[str]:
    return [QEMU[triple], "-L", f"/usr/{triple}", str(binary), "--port", "0", *args]


def python_server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "polyloop", "rpc", "server", "--port", "0", *args]


def python_env() -> dict:
    """The environment of a Python server: this checkout's polyloop, the session's cache."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([src, *sys.path]),
                POLYLOOP_CACHE_DIR=str(CONFIG.cache_dir))


def connect(server: Server, **options):
    """``rpc.connect`` to ``server``, tried again for a while when it is busy (a session that
    just ended may count against its limit for a moment)."""
    for _ in range(100):
        try:
            return rpc.connect(server.host, server.port, **options)
        except RemoteError as e:
            if "busy" not in str(e):
                raise
            time.sleep(0.1)
    raise AssertionError(f"the server at {server.host}:{server.port} stayed busy")


@functools.cache
def server_binary(triple: str) -> Path:
    """The C server built for ``triple``, once per test process (skips without the tools)."""
    require_qemu(triple)
    return rpc.build_server(triple, Path(tempfile.mkdtemp(prefix="polyloop-test-")) / "server")


def emulated_device(triple: str, *args: str) -> Server:
    """The C server for ``triple`` under qemu-user on loopback."""
    return start(qemu_command(triple, server_binary(triple), *args))
