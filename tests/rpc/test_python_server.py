# SPDX-License-Identifier: Apache-2.0
"""The Python server (``polyloop rpc server``) on this machine: kernels and models run there
match NumPy, arguments are checked before anything is sent, the device's errors arrive as
PolyloopError, and the security rules hold (loopback unless keyed, wrong keys refused,
sessions limited; the key is tested with the tracker and the C server)."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

import polyloop as pl
from polyloop import rpc
from polyloop.rpc.protocol import RemoteError
from polyloop.rpc.wire import recv_message, send_message

from fuzz.corpus import PROGRAMS

from .devices import connect


def test_a_kernel_runs_on_the_server_and_matches_numpy(python_server, rng):
    mod = pl.build(PROGRAMS["row_softmax"].make())
    with connect(python_server) as remote:
        assert remote.info["impl"] == "python"
        f = remote.load_module(remote.upload(mod))
        x = rng.standard_normal((13, 29))
        want = np.exp(x - x.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
        np.testing.assert_allclose(f(x), want, rtol=1e-12)
        out = np.full((13, 29), np.nan)            # an output passed in is written there
        assert f(x, out) is None
        np.testing.assert_allclose(out, want, rtol=1e-12)
        assert f.benchmark(x, repeat=3, min_repeat_ms=0) > 0 and len(f.last_times) == 3


def test_arguments_are_checked_here_and_errors_come_from_the_device(python_server):
    mod = pl.build(PROGRAMS["row_softmax"].make())
    with connect(python_server) as remote:
        f = remote.load_module(remote.upload(mod))
        with pytest.raises(pl.ArgumentError, match="must have dtype float64"):
            f(np.ones((3, 4), "float32"))
        with pytest.raises(RemoteError, match="no function of that number"):
            remote.request({"op": "call", "fn": 99, "args": [], "params": []}, "call")
        with pytest.raises(RemoteError, match="not an ELF shared library"):
            remote.request({"op": "upload", "data": b"#!/bin/sh\n"}, "upload")
        with pytest.raises(RemoteError, match="has no function 'nope'"):
            remote.request({"op": "load", "lib": 0, "entry": "nope"}, "load")
        np.testing.assert_allclose(f(np.zeros((2, 2))), 0.5)   # the session goes on


def test_a_model_runs_on_the_server(python_server, rng):
    b = pl.graph.GraphBuilder("mlp")
    x = b.input("x", ("batch", 6))
    w = b.constant(rng.standard_normal((5, 6)).astype("float32"), "w")
    g = b.build(b.emit(pl.graph.Op.RELU, b.emit(pl.graph.Op.LINEAR, x, w)))
    ex = pl.graph.build(g)
    with connect(python_server) as remote:
        f = remote.load_module(remote.upload(ex))
        xs = rng.standard_normal((7, 6)).astype("float32")
        np.testing.assert_allclose(f(xs), ex(xs), rtol=1e-6)
        with pytest.raises(pl.ArgumentError, match="expected dtype float32"):
            f(xs.astype("float64"))


def test_off_loopback_needs_a_key():
    with pytest.raises(pl.PolyloopError, match="needs a key"):
        rpc.ServerOptions(host="0.0.0.0").check()


def test_sessions_are_limited(python_server):
    first = connect(python_server)
    second = connect(python_server)
    try:
        with pytest.raises(RemoteError, match="busy"):
            rpc.connect(python_server.host, python_server.port)
    finally:
        first.close()
        second.close()


def raw_session(host: str, port: int) -> socket.socket:
    """A connection past the handshake, sent by hand (a session that just ended may still
    count against the server's limit for a moment: retried)."""
    for _ in range(50):
        s = socket.create_connection((host, port), timeout=30)
        if "error" not in recv_message(s, 1 << 16):
            send_message(s, {"op": "hello", "version": 1, "mac": None})
            return s
        s.close()
        time.sleep(0.1)
    raise AssertionError("the server stayed busy")


def test_a_truncated_message_closes_the_session_with_an_error(python_server):
    with raw_session(python_server.host, python_server.port) as s:
        assert recv_message(s, 1 << 16) == {"ok": True}
        s.sendall(b"\x00\x00\x00\x10\x82")           # 16 bytes announced, 1 sent, then EOF
        s.shutdown(socket.SHUT_WR)
        answer = recv_message(s, 1 << 16)
        assert answer["ok"] is False and answer["fatal"] is True
    with connect(python_server) as remote:   # still serving
        assert remote.info["role"] == "server"


@pl.script
def axpy(alpha: float, X: pl.Buffer[("n",), "float64"], Y: pl.Buffer[("n",), "float64"]):
    for i in range(n):
        Y[i] = alpha * X[i] + Y[i]


def test_scalars_and_empty_arrays_travel(python_server, rng):
    with connect(python_server) as remote:
        f = remote.load_module(remote.upload(pl.build(axpy)))
        x, y = rng.standard_normal(9), rng.standard_normal(9)
        want = 2.5 * x + y
        f(2.5, x, y)                              # Y is read and written: copied both ways
        np.testing.assert_allclose(y, want, rtol=1e-15)
        f(2.5, np.zeros(0), np.zeros(0))
