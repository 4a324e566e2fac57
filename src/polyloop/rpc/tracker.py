# SPDX-License-Identifier: Apache-2.0
"""``polyloop rpc tracker``: shares a pool of devices between tuning jobs.

A device's RPC server registers under a device key (``--tracker HOST:PORT --device-key
rk3588``) and keeps that connection open: while it is open the device is in the pool, and
when it closes (the device died, its server stopped) the device is gone. A job asks for a
device of a key and gets one to itself (a lease: its address and target) until it gives it
back, or its connection to the tracker ends; a job that reports its device failed leaves
that device out of the pool for a moment (``quarantine``), so that a dead device's
registration has time to end before it is handed out again.

>>> tracker = Tracker(TrackerOptions(port=0)); host, port = tracker.start()   # doctest: +SKIP
"""
from __future__ import annotations

import itertools
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import PolyloopError
from .protocol import (DEFAULT_TRACKER_PORT, HELLO_LIMIT, HELLO_SECONDS, RemoteError,
                       client_handshake, expect_ok, is_loopback, send_error, server_handshake)
from .protocol import field as read_field
from .wire import ProtocolError, recv_message, send_message

MAX_DEVICES = 4096
MAX_CONNECTIONS = 1024


@dataclass(frozen=True)
class TrackerOptions:
    """The tracker's settings: where it listens, its key (needed off loopback, and then
    asked of devices and jobs alike), and the seconds a failed device stays out."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_TRACKER_PORT
    key: bytes | None = None
    quarantine: float = 2.0

    def check(self) -> None:
        if not is_loopback(self.host) and self.key is None:
            raise PolyloopError(f"a tracker listening on {self.host} (not loopback) needs a "
                                "key: give --key or --key-file")


@dataclass
class Device:
    """A registered device server."""

    number: int
    device_key: str
    host: str
    port: int
    target: str
    info: dict = field(default_factory=dict)
    lease: int | None = None
    job: int | None = None
    quarantine_until: float = 0.0

    def describe(self) -> dict:
        return {"device_key": self.device_key, "host": self.host, "port": self.port,
                "target": self.target, "busy": self.lease is not None, **self.info}


class Tracker:
    """The tracker's state and its server (see the module docstring)."""

    def __init__(self, options: TrackerOptions = TrackerOptions()) -> None:
        options.check()
        self.options = options
        self.devices: dict[int, Device] = {}
        self.changed = threading.Condition()
        self._numbers = itertools.count(1)
        self._server: socketserver.ThreadingTCPServer | None = None
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)

    # the server ---------------------------------------------------------------------------------
    def start(self) -> tuple[str, int]:
        """Listen and serve in a background thread; the address listened on."""
        tracker = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                tracker.handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((self.options.host, self.options.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True,
                         name="polyloop-rpc-tracker").start()
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, sock: socket.socket) -> None:
        """One connection: a device's registration or a job's requests (at most
        ``MAX_CONNECTIONS`` at once; a client has ``HELLO_SECONDS`` to prove the key)."""
        if not self._connections.acquire(blocking=False):
            send_error(sock, "the tracker has too many connections", fatal=True)
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(HELLO_SECONDS)
        job = next(self._numbers)
        try:
            if not server_handshake(sock, self.options.key, {"role": "tracker",
                                                             "impl": "python"}):
                return
            sock.settimeout(None)
            first = recv_message(sock, HELLO_LIMIT)
            if first.get("op") == "register":
                self._device_session(sock, first)
            else:
                self._job_session(sock, job, first)
        except (OSError, ProtocolError) as e:
            send_error(sock, str(e), fatal=True)
        finally:
            self._release_all(job)
            self._connections.release()

    def _device_session(self, sock: socket.socket, m: dict) -> None:
        device = Device(next(self._numbers), _text(m, "device_key", 128), _text(m, "host", 255),
                        read_field(m, "port", int), _text(m, "target", 200),
                        {k: m[k] for k in ("impl", "threads", "max_sessions")
                         if isinstance(m.get(k), (int, str))})
        if not 0 < device.port < 65536:
            raise ProtocolError("register: the port is not in 1..65535")
        with self.changed:
            if len(self.devices) >= MAX_DEVICES:
                send_error(sock, "the tracker holds too many devices", fatal=True)
                return
            self.devices[device.number] = device
            self.changed.notify_all()
        send_message(sock, {"ok": True})
        try:
            while True:       # the registration lasts as long as the connection
                recv_message(sock, HELLO_LIMIT)
                send_message(sock, {"ok": True})
        except (OSError, ProtocolError):
            pass
        finally:
            with self.changed:
                self.devices.pop(device.number, None)
                self.changed.notify_all()

    def _job_session(self, sock: socket.socket, job: int, m: dict | None) -> None:
        while True:
            if m is None:
                m = recv_message(sock, HELLO_LIMIT)
            op = m.get("op")
            if op == "request":
                answer = self._lease(job, _text(m, "device_key", 128),
                                     read_field(m, "timeout_ms", int, 60000) / 1e3)
            elif op == "release":
                self._release(job, read_field(m, "lease", int),
                              bool(read_field(m, "failed", bool, False)))
                answer = {"ok": True}
            elif op == "status":
                with self.changed:
                    answer = {"ok": True, "devices": [d.describe()
                                                      for d in self.devices.values()]}
            elif op == "bye":
                send_message(sock, {"ok": True})
                return
            else:
                answer = {"ok": False, "error": f"unknown request {op!r}"}
            send_message(sock, answer)
            m = None

    # leases -------------------------------------------------------------------------------------
    def _lease(self, job: int, device_key: str, wait: float) -> dict:
        deadline = time.monotonic() + max(0.0, min(wait, 3600.0))
        with self.changed:
            while True:
                now = time.monotonic()
                free = [d for d in self.devices.values() if d.device_key == device_key
                        and d.lease is None and d.quarantine_until <= now]
                if free:
                    device = min(free, key=lambda d: d.number)
                    device.lease, device.job = next(self._numbers), job
                    return {"ok": True, "lease": device.lease, "host": device.host,
                            "port": device.port, "target": device.target}
                if now >= deadline:
                    known = [d for d in self.devices.values() if d.device_key == device_key]
                    return {"ok": False, "error": f"no free device of key '{device_key}' within "
                                                  f"{wait:g} s ({len(known)} registered, "
                                                  f"{sum(d.lease is not None for d in known)} "
                                                  "busy)"}
                self.changed.wait(timeout=min(0.25, deadline - now))

    def _release(self, job: int, lease: int, failed: bool) -> None:
        with self.changed:
            for d in self.devices.values():
                if d.lease == lease and d.job == job:
                    d.lease = d.job = None
                    if failed:
                        d.quarantine_until = time.monotonic() + self.options.quarantine
            self.changed.notify_all()

    def _release_all(self, job: int) -> None:
        with self.changed:
            for d in self.devices.values():
                if d.job == job:
                    d.lease = d.job = None
            self.changed.notify_all()


def _text(m: dict, name: str, limit: int) -> str:
    value = read_field(m, name, str)
    if not value or len(value) > limit or not value.isprintable():
        raise ProtocolError(f"field {name!r} must be printable text of 1..{limit} characters")
    return value


class TrackerClient:
    """A job's connection to a tracker: ask for a device, give it back."""

    def __init__(self, host: str, port: int, *, key: bytes | None = None,
                 timeout: float = 60.0) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise PolyloopError(f"cannot connect to the tracker at {host}:{port}: "
                                f"{e.strerror or e}; start one with polyloop rpc tracker") from None
        self.address = f"{host}:{port}"
        self.timeout = timeout
        try:
            client_handshake(self.sock, key, role="tracker")
        except BaseException:
            self.sock.close()
            raise

    def _ask(self, message: dict, what: str, wait: float = 0.0) -> dict:
        self.sock.settimeout(self.timeout + wait)
        try:
            send_message(self.sock, message)
            return recv_message(self.sock, HELLO_LIMIT)
        except (OSError, ProtocolError) as e:
            raise PolyloopError(f"{what}: the tracker at {self.address} did not answer ({e})"
                                ) from None

    def request(self, device_key: str, *, wait: float = 60.0) -> dict[str, Any]:
        """A device of ``device_key`` to this job alone: lease, host, port, target."""
        answer = self._ask({"op": "request", "device_key": device_key,
                            "timeout_ms": int(wait * 1000)}, "request", wait)
        if not answer.get("ok"):
            raise RemoteError(f"the tracker at {self.address} has no device: "
                              f"{answer.get('error')}")
        return answer

    def release(self, lease: int, *, failed: bool = False) -> None:
        expect_ok(self._ask({"op": "release", "lease": lease, "failed": failed}, "release"),
                  "release")

    def status(self) -> list[dict]:
        """The registered devices (key, address, target, busy)."""
        return list(expect_ok(self._ask({"op": "status"}, "status"), "status")["devices"])

    def close(self) -> None:
        try:
            self._ask({"op": "bye"}, "bye")
        except PolyloopError:
            pass
        self.sock.close()
