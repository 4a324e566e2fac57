# SPDX-License-Identifier: Apache-2.0
"""Servers shared by the RPC tests, built and started once per test session (per worker):
the aarch64 C server under qemu-aarch64, and the Python server."""
from __future__ import annotations

import pytest

from .devices import (connect, emulated_device, python_env, python_server_command,
                      server_binary, start)

AARCH64 = "aarch64-linux-gnu"


@pytest.fixture(scope="session")
def aarch64_server_binary():
    """The C server cross-compiled for aarch64 (built once)."""
    return server_binary(AARCH64)


@pytest.fixture(scope="session")
def aarch64_device(aarch64_server_binary):
    """An emulated aarch64 device: the C server under qemu-aarch64 on loopback."""
    server = emulated_device(AARCH64)
    yield server
    server.stop()


@pytest.fixture
def remote(aarch64_device):
    """A session with the emulated aarch64 device."""
    with connect(aarch64_device) as r:
        yield r


@pytest.fixture(scope="session")
def python_server():
    """The Python server on this machine (``polyloop rpc server``), on loopback."""
    server = start(python_server_command("--max-sessions", "2"), env=python_env())
    yield server
    server.stop()
