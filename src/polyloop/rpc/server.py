# SPDX-License-Identifier: Apache-2.0
"""``polyloop rpc server``: the RPC server for machines with Python, speaking the protocol of
the C server (docs/rpc.md) with the same rules.

The listening process never loads a library: each connection is served by a forked process
(``session.py``) in a directory of its own inside the work directory, removed when the session
ends or its process dies. It binds to loopback unless told otherwise, and then only with a
key. With ``tracker=`` it registers with a tracker and stays registered.

>>> serve(ServerOptions(port=9090))    # doctest: +SKIP
"""
from __future__ import annotations

import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import PolyloopError
from ..runtime.target import Target, host_triple
from .protocol import (DEFAULT_PORT, HELLO_LIMIT, client_handshake, is_loopback, send_error)
from .session import Limits, Session
from .wire import recv_message, send_message

TRACKER_RETRY_SECONDS = 3.0


@dataclass(frozen=True)
class ServerOptions:
    """The server's settings (``polyloop rpc server --help`` describes each)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    key: bytes | None = None
    work_dir: str | None = None
    target: str | None = None           # default: this machine's triple
    max_sessions: int = 4
    limits: Limits = Limits()
    tracker: tuple[str, int] | None = None
    device_key: str | None = None
    advertise: str | None = None

    def check(self) -> None:
        """Refuse settings that would expose the server, with the fix."""
        if not is_loopback(self.host) and self.key is None:
            raise PolyloopError(f"listening on {self.host} (not loopback) needs a key: give "
                                "--key or --key-file (clients then connect with key=...)")
        if self.tracker is not None and not self.device_key:
            raise PolyloopError("registering with a tracker needs --device-key (the name jobs "
                                "ask the tracker for, e.g. rk3588)")
        if not 1 <= self.max_sessions <= 256:
            raise PolyloopError(f"max_sessions must be in 1..256, got {self.max_sessions}")

    @property
    def target_string(self) -> str:
        return str(Target.parse(self.target)) if self.target else f"c -mtriple={host_triple()}"


def serve(options: ServerOptions, *, ready: Callable[[str, int], None] | None = None) -> None:
    """Serve until SIGTERM or SIGINT; ``ready(host, port)`` is called once listening."""
    options.check()
    work = _work_dir(options.work_dir)
    listener = socket.create_server((options.host, options.port), reuse_port=False)
    port = listener.getsockname()[1]
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    children: dict[int, Path] = {}
    tracker: socket.socket | None = None
    next_try = 0.0
    print(f"polyloop rpc server (Python, protocol 1, target '{options.target_string}') "
          f"listening on {options.host}:{port}, work directory {work}"
          + (", key required" if options.key else ""), flush=True)
    if ready is not None:
        ready(options.host, port)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    try:
        while not stop:
            if options.tracker is not None and tracker is None and time.monotonic() >= next_try:
                next_try = time.monotonic() + TRACKER_RETRY_SECONDS
                tracker = _register(options, port)
                if tracker is not None:
                    selector.register(tracker, selectors.EVENT_READ)
            for event, _ in selector.select(timeout=0.5):
                _reap(children)         # sessions that ended no longer count
                if event.fileobj is tracker:
                    if not _tracker_message(tracker):
                        selector.unregister(tracker)
                        tracker.close()
                        tracker = None
                elif event.fileobj is listener:
                    _accept(listener, tracker, options, work, children)
            _reap(children)
    finally:
        for pid in children:
            _kill(pid)
        _reap(children, block=True)
        listener.close()
        if options.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _work_dir(given: str | None) -> Path:
    if given is None:
        return Path(tempfile.mkdtemp(prefix="polyloop-rpc-"))
    path = Path(given)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise PolyloopError(f"--work-dir {path} must be a directory of this user that others "
                            f"cannot write (chmod 700 {path})")
    return path


def _hello(options: ServerOptions) -> dict:
    limits = options.limits
    return {"role": "server", "impl": "python", "target": options.target_string,
            "machine": os.uname().machine, "threads": os.cpu_count() or 1,
            "max_frame": limits.max_frame, "max_upload": limits.max_upload}


def _accept(listener: socket.socket, tracker: socket.socket | None, options: ServerOptions,
            work: Path, children: dict[int, Path]) -> None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(children) >= options.max_sessions:
            send_message(conn, {"proto": "polyloop-rpc", "version": 1, "role": "server",
                                "error": f"the server is busy: it serves at most "
                                         f"{options.max_sessions} sessions at once "
                                         "(--max-sessions)"})
            return
        directory = Path(tempfile.mkdtemp(prefix="session-", dir=work))
        pid = os.fork()
        if pid == 0:           # the session's process: it never returns
            status = 0
            try:
                listener.close()
                if tracker is not None:
                    tracker.close()
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
                    signal.signal(sig, signal.SIG_DFL)
                Session(conn, directory, options.key, _hello(options), options.limits).serve()
            except BaseException:     # noqa: BLE001 - the session ends; the server goes on
                status = 2
                traceback.print_exc()     # a bug of the server: in its log
                send_error(conn, "internal error of the Python server", fatal=True)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
                os._exit(status)
        children[pid] = directory


def _reap(children: dict[int, Path], *, block: bool = False) -> None:
    while children:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        directory = children.pop(pid, None)
        if directory is not None:      # a session that crashed leaves its files
            shutil.rmtree(directory, ignore_errors=True)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _register(options: ServerOptions, port: int) -> socket.socket | None:
    """Connect to the tracker and register this server; None (tried again later) on failure."""
    assert options.tracker is not None
    try:
        sock = socket.create_connection(options.tracker, timeout=5.0)
        client_handshake(sock, options.key, role="tracker")
        host = options.advertise or (options.host if options.host not in ("0.0.0.0", "::")
                                     else sock.getsockname()[0])
        send_message(sock, {"op": "register", "device_key": options.device_key, "host": host,
                            "port": port, "target": options.target_string, "impl": "python",
                            "threads": os.cpu_count() or 1,
                            "max_sessions": options.max_sessions})
        answer = recv_message(sock, HELLO_LIMIT)
    except (OSError, PolyloopError) as e:
        print(f"polyloop rpc server: cannot register with the tracker "
              f"{options.tracker[0]}:{options.tracker[1]}: {e}", file=sys.stderr, flush=True)
        return None
    if not answer.get("ok"):
        print(f"polyloop rpc server: the tracker refused the registration: "
              f"{answer.get('error')}", file=sys.stderr, flush=True)
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def _tracker_message(sock: socket.socket) -> bool:
    """Answer the tracker's ping; False when the tracker is gone."""
    try:
        recv_message(sock, HELLO_LIMIT)
        send_message(sock, {"ok": True})
        return True
    except (OSError, PolyloopError):
        return False
