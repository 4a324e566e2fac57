# SPDX-License-Identifier: Apache-2.0
"""The wire format of polyloop's RPC: length-prefixed frames of MessagePack.

A frame is a 4-byte big-endian length followed by that many bytes, one MessagePack map (the
message). The subset used: nil, booleans, integers (up to 64 bits), float64 (float32 is read),
UTF-8 strings, binary, arrays and maps with string keys. Decoding never trusts a length: every
count is checked against the bytes left, nesting is limited, and anything else (a truncated
value, an unknown type byte, bytes after the value) is a ``ProtocolError``. See docs/rpc.md.

>>> decode(encode({"op": "call", "args": [b"\\x00\\x01", 16], "x": -1.5}))
{'op': 'call', 'args': [b'\\x00\\x01', 16], 'x': -1.5}
"""
from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

from ..errors import PolyloopError

MAX_DEPTH = 16
HEADER = struct.Struct(">I")


class ProtocolError(PolyloopError):
    """A message that breaks the wire format, or a connection that ended inside one."""


# encoding --------------------------------------------------------------------------------------
def encode(value: Any) -> bytes:
    """``value`` as MessagePack bytes."""
    return b"".join(encode_parts(value))


def encode_parts(value: Any) -> list[bytes | memoryview]:
    """``value`` as a list of byte strings; large binaries are referenced, not copied."""
    parts: list[bytes | memoryview] = []
    _encode(value, parts, 0)
    return parts


def _encode(v: Any, out: list, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ProtocolError(f"message nested deeper than {MAX_DEPTH} levels")
    if v is None:
        out.append(b"\xc0")
    elif v is True or v is False:
        out.append(b"\xc3" if v else b"\xc2")
    elif isinstance(v, int):
        out.append(_int(v))
    elif isinstance(v, float):
        out.append(b"\xcb" + struct.pack(">d", v))
    elif isinstance(v, str):
        data = v.encode("utf-8")
        out.append(_head(len(data), 0xa0, 32, b"\xd9", b"\xda", b"\xdb") + data)
    elif isinstance(v, (bytes, bytearray, memoryview)):
        view = memoryview(v)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
        out.append(_head(len(view), None, 0, b"\xc4", b"\xc5", b"\xc6"))
        out.append(view)
    elif isinstance(v, (list, tuple)):
        out.append(_head(len(v), 0x90, 16, None, b"\xdc", b"\xdd"))
        for item in v:
            _encode(item, out, depth + 1)
    elif isinstance(v, dict):
        out.append(_head(len(v), 0x80, 16, None, b"\xde", b"\xdf"))
        for key, item in v.items():
            if not isinstance(key, str):
                raise ProtocolError(f"message keys are strings, got {key!r}")
            _encode(key, out, depth + 1)
            _encode(item, out, depth + 1)
    else:
        raise ProtocolError(f"cannot encode a {type(v).__name__} in a message")


def _int(v: int) -> bytes:
    if 0 <= v < 128:
        return bytes((v,))
    if -32 <= v < 0:
        return bytes((v & 0xff,))
    if -2**63 <= v < 2**63:
        return b"\xd3" + struct.pack(">q", v)
    if 0 <= v < 2**64:
        return b"\xcf" + struct.pack(">Q", v)
    raise ProtocolError(f"integer {v} does not fit 64 bits")


def _head(n: int, fix: int | None, fix_limit: int, b8: bytes | None, b16: bytes,
          b32: bytes) -> bytes:
    if fix is not None and n < fix_limit:
        return bytes((fix | n,))
    if b8 is not None and n < 256:
        return b8 + bytes((n,))
    if n < 65536:
        return b16 + struct.pack(">H", n)
    if n < 2**32:
        return b32 + struct.pack(">I", n)
    raise ProtocolError(f"a value of {n} elements or bytes is too large for a message")


# decoding --------------------------------------------------------------------------------------
def decode(data: bytes | memoryview) -> Any:
    """The one MessagePack value of ``data`` (binaries as ``bytes``); ProtocolError when it is
    malformed, truncated or followed by more bytes."""
    view = memoryview(data).cast("B")
    value, pos = _decode(view, 0, 0)
    if pos != len(view):
        raise ProtocolError(f"{len(view) - pos} bytes after the end of the message")
    return value


_FIXED = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h", 0xd2: ">i",
          0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
_SIZED = {0xc4: (1, "bin"), 0xc5: (2, "bin"), 0xc6: (4, "bin"), 0xd9: (1, "str"),
          0xda: (2, "str"), 0xdb: (4, "str"), 0xdc: (2, "array"), 0xdd: (4, "array"),
          0xde: (2, "map"), 0xdf: (4, "map")}


def _take(view: memoryview, pos: int, n: int) -> memoryview:
    if n < 0 or pos + n > len(view):
        raise ProtocolError(f"message truncated: {n} bytes needed at offset {pos}, "
                            f"{max(0, len(view) - pos)} left")
    return view[pos:pos + n]


def _decode(view: memoryview, pos: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise ProtocolError(f"message nested deeper than {MAX_DEPTH} levels")
    b = _take(view, pos, 1)[0]
    pos += 1
    if b < 0x80:
        return b, pos
    if b >= 0xe0:
        return b - 0x100, pos
    if 0xa0 <= b <= 0xbf:
        return _string(view, pos, b & 0x1f)
    if 0x90 <= b <= 0x9f:
        return _array(view, pos, b & 0x0f, depth)
    if 0x80 <= b <= 0x8f:
        return _map(view, pos, b & 0x0f, depth)
    if b == 0xc0:
        return None, pos
    if b in (0xc2, 0xc3):
        return b == 0xc3, pos
    if b in _FIXED:
        fmt = _FIXED[b]
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, _take(view, pos, size))[0], pos + size
    if b in _SIZED:
        width, kind = _SIZED[b]
        n = int.from_bytes(_take(view, pos, width), "big")
        pos += width
        if kind == "bin":
            return bytes(_take(view, pos, n)), pos + n
        if kind == "str":
            return _string(view, pos, n)
        return (_array if kind == "array" else _map)(view, pos, n, depth)
    raise ProtocolError(f"unknown MessagePack type byte 0x{b:02x} at offset {pos - 1}")


def _string(view: memoryview, pos: int, n: int) -> tuple[str, int]:
    try:
        return bytes(_take(view, pos, n)).decode("utf-8"), pos + n
    except UnicodeDecodeError:
        raise ProtocolError(f"a string at offset {pos} is not UTF-8") from None


def _array(view: memoryview, pos: int, n: int, depth: int) -> tuple[list, int]:
    if n > len(view) - pos:     # every element takes at least one byte
        raise ProtocolError(f"an array of {n} elements at offset {pos} is longer than the "
                            "message")
    items = []
    for _ in range(n):
        item, pos = _decode(view, pos, depth + 1)
        items.append(item)
    return items, pos


def _map(view: memoryview, pos: int, n: int, depth: int) -> tuple[dict, int]:
    if 2 * n > len(view) - pos:
        raise ProtocolError(f"a map of {n} entries at offset {pos} is longer than the message")
    out: dict[str, Any] = {}
    for _ in range(n):
        key, pos = _decode(view, pos, depth + 1)
        if not isinstance(key, str):
            raise ProtocolError(f"a map key at offset {pos} is not a string")
        if key in out:
            raise ProtocolError(f"key {key!r} appears twice in a map")
        out[key], pos = _decode(view, pos, depth + 1)
    return out, pos


# frames ----------------------------------------------------------------------------------------
def send_message(sock: socket.socket, message: dict) -> None:
    """Send ``message`` as one frame."""
    parts = encode_parts(message)
    total = sum(len(p) for p in parts)
    if total >= 2**32:
        raise ProtocolError(f"a message of {total} bytes is too large (frames hold < 4 GiB)")
    sock.sendall(HEADER.pack(total))
    for part in _coalesced(parts):
        sock.sendall(part)


def _coalesced(parts: list) -> Iterator[bytes | memoryview]:
    """Small parts joined (one system call each would be slow), large ones as they are."""
    small: list = []
    for p in parts:
        if len(p) < 65536:
            small.append(p)
            continue
        if small:
            yield b"".join(small)
            small = []
        yield p
    if small:
        yield b"".join(small)


def recv_exact(sock: socket.socket, n: int) -> bytearray:
    """Exactly ``n`` bytes; ProtocolError when the connection ends first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ProtocolError(f"the connection closed {got} bytes into a {n}-byte read")
        got += k
    return buf


def recv_message(sock: socket.socket, max_bytes: int) -> dict:
    """The next frame's message (a map); ProtocolError for a frame over ``max_bytes``, a
    malformed message or a connection that ends inside the frame."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) == 0:
        raise ConnectionClosed("the peer closed the connection")
    if len(head) < 4:
        head += bytes(recv_exact(sock, 4 - len(head)))
    (n,) = HEADER.unpack(head)
    if n > max_bytes:
        raise ProtocolError(f"a frame of {n} bytes is over the limit of {max_bytes}")
    message = decode(recv_exact(sock, n))
    if not isinstance(message, dict):
        raise ProtocolError(f"a message is a map, got a {type(message).__name__}")
    return message


class ConnectionClosed(ProtocolError):
    """The peer closed the connection between two frames."""
