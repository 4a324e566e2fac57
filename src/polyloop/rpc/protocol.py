# SPDX-License-Identifier: Apache-2.0
"""The messages of polyloop's RPC protocol (version 1) and its handshake; docs/rpc.md is the
reference, this module and ``csrc/`` are its two implementations.

The server speaks first: a ``hello`` with a fresh 32-byte nonce. The client answers with
``{"op": "hello", "version": 1, "mac": HMAC-SHA256(key, nonce)}`` (``mac`` nil without a key);
the server compares MACs in constant time and answers ``{"ok": true}`` or an error and closes.
The key itself never crosses the wire. Every later request is a map with ``op``; every answer
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` (with ``"fatal": true`` when the
server then closes the session).

>>> mac = session_mac(b"secret", bytes(32))
>>> len(mac), check_mac(b"secret", bytes(32), mac), check_mac(b"other", bytes(32), mac)
(32, True, False)
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import socket
from typing import Any

from .. import config
from ..errors import PolyloopError
from .wire import ProtocolError, recv_message, send_message

PROTOCOL = "polyloop-rpc"
VERSION = 1
NONCE_BYTES = 32
HELLO_LIMIT = 64 * 1024          # the largest handshake frame either side accepts
HELLO_SECONDS = 10.0             # the time a client has to prove the key
DEFAULT_PORT = 9090
DEFAULT_TRACKER_PORT = 9190


class RemoteError(PolyloopError):
    """The device (or tracker) refused a request or failed it; the message is the device's."""


class SessionLost(PolyloopError):
    """The session with a device ended in the middle of a request: the device crashed, was
    stopped, or (``timed_out``) did not answer in time."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def new_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def session_mac(key: bytes | None, nonce: bytes) -> bytes | None:
    """The client's proof that it knows ``key``: HMAC-SHA256 of the server's nonce."""
    if key is None:
        return None
    return hmac.new(key, nonce, hashlib.sha256).digest()


def check_mac(key: bytes | None, nonce: bytes, mac: object) -> bool:
    """Whether ``mac`` proves ``key`` (a server without a key accepts any client). The
    comparison takes the same time wherever the first difference is."""
    if key is None:
        return True
    if not isinstance(mac, bytes):
        return False
    expected = session_mac(key, nonce)
    return expected is not None and hmac.compare_digest(expected, mac)


def as_key(key: str | bytes | None) -> bytes | None:
    """A key given as text or bytes, as bytes (None: ``POLYLOOP_RPC_KEY`` if set; empty: no
    key)."""
    if key is None:
        key = config.CONFIG.rpc_key
    if key is None or key == "" or key == b"":
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes):
        return key
    raise PolyloopError(f"key must be a string or bytes, got {type(key).__name__}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, ``localhost``).

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, False, True)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_handshake(sock: socket.socket, key: bytes | None, *, role: str) -> dict:
    """Read the server's hello, prove the key, return the hello. ``role``: what the caller
    expects to talk to (``server`` or ``tracker``)."""
    hello = recv_message(sock, HELLO_LIMIT)
    if isinstance(hello.get("error"), str):       # e.g. busy: its sessions are all taken
        raise RemoteError(f"the {role} refused the session: {hello['error']}")
    if hello.get("proto") != PROTOCOL:
        raise ProtocolError("the peer does not speak the polyloop RPC protocol (its first "
                            f"message is {str(hello)[:80]})")
    if hello.get("version") != VERSION:
        raise ProtocolError(f"the peer speaks protocol version {hello.get('version')!r}; this "
                            f"polyloop speaks version {VERSION}: use the same polyloop release "
                            "(rebuild the device's server with polyloop rpc build-server)")
    if hello.get("role") != role:
        raise PolyloopError(f"expected a polyloop RPC {role}, but the peer is a "
                            f"{hello.get('role')!r}; check the port")
    nonce = hello.get("nonce")
    if not isinstance(nonce, bytes) or len(nonce) != NONCE_BYTES:
        raise ProtocolError("the server's hello has no valid nonce")
    if hello.get("auth") and key is None:
        raise RemoteError(f"the {role} requires a key: connect with key=... (the --key it was "
                          "started with)")
    send_message(sock, {"op": "hello", "version": VERSION, "mac": session_mac(key, nonce)})
    answer = recv_message(sock, HELLO_LIMIT)
    if not answer.get("ok"):
        raise RemoteError(f"the {role} refused the session: {answer.get('error', '?')}")
    return hello


def expect_ok(answer: dict, what: str) -> dict:
    """``answer`` if it reports success, else RemoteError with the peer's message."""
    if answer.get("ok") is True:
        return answer
    error = answer.get("error")
    raise RemoteError(f"{what} failed on the device: "
                      f"{error if isinstance(error, str) else 'no reason given'}")


def field(message: dict, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """``message[name]`` checked to be a ``kind`` (a server reads every field this way);
    ProtocolError naming the field otherwise."""
    if name not in message:
        if default is not ...:
            return default
        raise ProtocolError(f"request {message.get('op')!r} lacks field {name!r}")
    value = message[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"field {name!r} of request {message.get('op')!r} has the wrong "
                            f"type ({type(value).__name__})")
    return value


def server_handshake(sock: socket.socket, key: bytes | None, hello: dict) -> bool:
    """Send the hello (``hello`` says the role and what the server offers) with a fresh
    nonce, check the client's proof of ``key``; False (after telling the client why) when it
    fails."""
    nonce = new_nonce()
    send_message(sock, {"proto": PROTOCOL, "version": VERSION, **hello, "nonce": nonce,
                        "auth": key is not None})
    answer = recv_message(sock, HELLO_LIMIT)
    if answer.get("op") != "hello" or answer.get("version") != VERSION:
        send_error(sock, f"the first request must be a hello of protocol version {VERSION}",
                   fatal=True)
        return False
    if not check_mac(key, nonce, answer.get("mac")):
        send_error(sock, "wrong key", fatal=True)
        return False
    send_message(sock, {"ok": True})
    return True


def send_error(sock: socket.socket, why: str, *, fatal: bool = False) -> None:
    """Answer a request with an error (``fatal``: the session ends after it)."""
    message: dict[str, Any] = {"ok": False, "error": why}
    if fatal:
        message["fatal"] = True
    try:
        send_message(sock, message)
    except OSError:
        pass
