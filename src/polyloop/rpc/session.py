# SPDX-License-Identifier: Apache-2.0
"""One session of the Python RPC server, in a process of its own (``server.py`` forks it):
the same requests, limits and answers as the C server's sessions (``csrc/pl_session.c``).

Libraries are written only into the session's directory under names the server chooses, and
only a library uploaded in this session can be loaded. A request that breaks the protocol
ends the session with an error; one that asks for something impossible gets an error and the
session goes on.
"""
from __future__ import annotations

import _ctypes
import ctypes
import os
import re
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from .protocol import HELLO_SECONDS
from .protocol import field as read_field
from .protocol import send_error, server_handshake
from .wire import ConnectionClosed, ProtocolError, recv_message, send_message

MAX_LIBS = 65536
MAX_ARGS = 4096
MAX_PARAMS = 4096
MAX_REPEAT = 10000
MAX_NUMBER = 1_000_000_000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}\Z")
_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_int64))
_SIZE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))
_CHECK = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64))


@dataclass(frozen=True)
class Limits:
    """What one session may ask for (the server's options)."""

    max_upload: int = 64 << 20
    max_frame: int = 256 << 20
    max_memory: int = 1 << 30
    session_timeout: float = 300.0
    call_seconds: int = 600


class Refused(Exception):
    """A request that cannot be served; the session goes on."""


@dataclass
class _Function:
    lib: int
    entry: str
    call: object
    workspace: object = None
    fault: object = None
    check: object = None


@dataclass
class _Buffers:
    """The aligned arrays of one call (kept alive until it ends)."""

    keep_alive: list = field(default_factory=list)
    addresses: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    total: int = 0

    def add(self, size: int, limit: int, data: bytes | None = None) -> None:
        if size < 0 or self.total + size > limit:
            raise Refused("the arrays of the call are over the server's memory limit "
                          "(--max-memory)")
        self.total += size
        raw = ctypes.create_string_buffer(size + 64)    # zeroed
        address = (ctypes.addressof(raw) + 63) & ~63
        if data:
            ctypes.memmove(address, data, size)
        self.keep_alive.append(raw)
        self.addresses.append(address)
        self.sizes.append(size)


class Session:
    """Serve one client on ``sock``; files only in ``directory``."""

    def __init__(self, sock: socket.socket, directory: Path, key: bytes | None,
                 hello: dict, limits: Limits) -> None:
        self.sock, self.dir, self.key, self.hello, self.limits = (sock, directory, key, hello,
                                                                  limits)
        self.libs: list[ctypes.CDLL | None | bool] = []    # None: uploaded, False: gone
        self.fns: list[_Function | None] = []

    def serve(self) -> None:
        # a client that does not prove the key promptly does not hold a session for long
        self.sock.settimeout(min(self.limits.session_timeout, HELLO_SECONDS))
        try:
            if not server_handshake(self.sock, self.key, self.hello):
                return
        except (ProtocolError, OSError) as e:
            send_error(self.sock, str(e), fatal=True)
            return
        self.sock.settimeout(self.limits.session_timeout)
        ops = {"upload": self.upload, "load": self.load, "call": self.call,
               "unload": self.unload}
        while True:
            try:
                message = recv_message(self.sock, self.limits.max_frame)
            except ConnectionClosed:
                return
            except (ProtocolError, OSError) as e:
                send_error(self.sock, str(e), fatal=True)
                return
            op = message.get("op")
            try:
                if op == "bye":
                    send_message(self.sock, {"ok": True})
                    return
                if op not in ops:
                    raise Refused(f"unknown request {op!r}")
                send_message(self.sock, {"ok": True, **ops[op](message)})
            except Refused as e:
                send_error(self.sock, f"{op}: {e}")
            except ProtocolError as e:
                send_error(self.sock, str(e), fatal=True)
                return

    # requests ----------------------------------------------------------------------------------
    def upload(self, m: dict) -> dict:
        data = read_field(m, "data", bytes)
        if len(data) > self.limits.max_upload:
            raise Refused(f"the library is larger than the server's limit of "
                          f"{self.limits.max_upload} bytes (--max-upload)")
        if data[:4] != b"\x7fELF":
            raise Refused("the data is not an ELF shared library")
        if len(self.libs) >= MAX_LIBS:
            raise Refused("too many libraries in one session")
        k = len(self.libs)
        path = self._path(k)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as e:
            raise Refused(f"cannot write the library file: {e.strerror}") from None
        self.libs.append(None)
        return {"lib": k}

    def load(self, m: dict) -> dict:
        k = self._lib(m)
        entry = read_field(m, "entry", str)
        workspace = read_field(m, "workspace", (str, type(None)), None)
        for name in (entry, workspace):
            if name is not None and not _IDENTIFIER.match(name):
                raise Refused(f"{name[:80]!r} is not a C function name")
        lib = self.libs[k]
        if lib is None:
            try:
                lib = self.libs[k] = ctypes.CDLL(str(self._path(k)), mode=os.RTLD_LOCAL)
            except OSError as e:
                raise Refused(f"cannot load the library: {e}") from None
            _pin_openmp()
        fn = _Function(k, entry, _symbol(lib, entry, _ENTRY, required=True))
        if workspace is not None:
            fn.workspace = _symbol(lib, workspace, _SIZE, required=True)
        fn.check = _symbol(lib, f"{entry}_check_sizes", _CHECK)
        if hasattr(lib, f"{entry}_index_fault"):
            fn.fault = (ctypes.c_int64 * 5).in_dll(lib, f"{entry}_index_fault")
        threads = read_field(m, "threads", int, 0)
        if 0 < threads <= 4096 and hasattr(lib, "omp_set_num_threads"):
            lib.omp_set_num_threads(ctypes.c_int(threads))
        self.fns.append(fn)
        return {"fn": len(self.fns) - 1}

    def unload(self, m: dict) -> dict:
        k = self._lib(m)
        lib = self.libs[k]
        self.libs[k] = False
        self.fns = [None if f is not None and f.lib == k else f for f in self.fns]
        if isinstance(lib, ctypes.CDLL) and hasattr(_ctypes, "dlclose"):
            _ctypes.dlclose(lib._handle)
        self._path(k).unlink(missing_ok=True)
        return {}

    def call(self, m: dict) -> dict:
        f = read_field(m, "fn", int)
        fn = self.fns[f] if 0 <= f < len(self.fns) else None
        if fn is None:
            raise Refused("no function of that number is loaded in this session")
        number = read_field(m, "number", int, 0)
        repeat = read_field(m, "repeat", int, 1) if number else 0
        min_ms = read_field(m, "min_repeat_ms", int, 0)
        timeout_ms = read_field(m, "timeout_ms", int, 0)
        if not (0 <= number <= MAX_NUMBER and 0 <= repeat <= MAX_REPEAT and 0 <= min_ms
                <= 3_600_000 and timeout_ms >= 0) or (number and repeat < 1):
            raise Refused("number, repeat, min_repeat_ms or timeout_ms is out of range")
        params, buffers, keep = self._arguments(m, fn)
        args = (ctypes.c_void_p * max(1, len(buffers.addresses)))(*buffers.addresses)
        seconds = self.limits.call_seconds
        if timeout_ms:
            seconds = min(seconds, -(-timeout_ms // 1000))
        signal.alarm(seconds)          # a kernel that hangs ends this session's process
        status = fn.call(args, params)
        times = _time(fn, args, params, number, repeat, min_ms) if not status and number else ()
        signal.alarm(0)
        if isinstance(times, int):
            status, times = times, ()
        answer = {"status": int(status), "times": list(times),
                  "outputs": [ctypes.string_at(buffers.addresses[i], buffers.sizes[i])
                              for i in keep]}
        if status == 2 and fn.fault is not None:
            answer["fault"] = [int(v) for v in fn.fault]
        if status == 3 and fn.check is not None:
            answer["why"] = (fn.check(params) or b"").decode("utf-8", "replace")
        return answer

    # helpers ------------------------------------------------------------------------------------
    def _path(self, k: int) -> Path:
        return self.dir / f"lib{k}.so"

    def _lib(self, m: dict) -> int:
        k = read_field(m, "lib", int)
        if not 0 <= k < len(self.libs) or self.libs[k] is False:
            raise Refused("no library of that number was uploaded in this session")
        return k

    def _arguments(self, m: dict, fn: _Function) -> tuple[ctypes.Array, _Buffers, list[int]]:
        values = read_field(m, "params", list)
        args = read_field(m, "args", list)
        keep = read_field(m, "keep", list, [])
        if len(values) > MAX_PARAMS or len(args) > MAX_ARGS:
            raise ProtocolError("call: too many arguments or size parameters")
        if not all(isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
                   for v in values):
            raise ProtocolError("call: a size parameter is not a 64-bit integer")
        params = (ctypes.c_int64 * (len(values) + 1))(*values)
        buffers = _Buffers()
        for a in args:
            if isinstance(a, bytes):
                buffers.add(len(a), self.limits.max_memory, a)
            elif isinstance(a, int) and not isinstance(a, bool) and a >= 0:
                buffers.add(a, self.limits.max_memory)
            else:
                raise ProtocolError("call: an argument is neither binary data nor a byte count")
        if fn.workspace is not None:
            buffers.add(int(fn.workspace(params)), self.limits.max_memory)
        if not all(isinstance(k, int) and 0 <= k < len(args) for k in keep):
            raise ProtocolError("call: 'keep' names no argument")
        return params, buffers, keep


def _pin_openmp() -> None:
    """Keep the OpenMP runtime a kernel pulled in loaded for good: its threads outlive the
    kernel's library, and unloading it with the library would pull the code from under them."""
    try:
        ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_NODELETE)
    except OSError:
        pass        # not loaded: the kernel does not use OpenMP


def _symbol(lib: ctypes.CDLL, name: str, kind: type, *, required: bool = False) -> object:
    try:
        return kind((name, lib))
    except AttributeError:
        if required:
            raise Refused(f"the library has no function '{name}'") from None
        return None


def _time(fn: _Function, args: ctypes.Array, params: ctypes.Array, number: int, repeat: int,
          min_ms: int) -> list[float] | int:
    """TVM's time_evaluator (as the C server's ``time_calls``); a failing status instead of
    the timings when a call fails."""
    times = []
    call = fn.call
    for _ in range(repeat):
        while True:
            start = time.perf_counter()
            for _ in range(number):
                status = call(args, params)
                if status:
                    return int(status)
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= min_ms or number >= MAX_NUMBER:
                break
            scale = min(10.0, 1.2 * min_ms / (elapsed * 1e3)) if elapsed > 0 else 10.0
            number = min(MAX_NUMBER, max(2 * number, int(number * scale) + 1))
        times.append(elapsed / number)
    return times
