# SPDX-License-Identifier: Apache-2.0
"""The RPC servers survive a fuzzer: mutated requests (flipped bits, truncated frames, lying
lengths, wrong types, garbage) sent to the C server, built for this machine with AddressSanitizer
and UndefinedBehaviorSanitizer, and to the Python server. Each is answered with an error or
ends its session; afterwards the server still serves a correct session, and no sanitizer
report was printed. POLYLOOP_FUZZ_EXAMPLES sets the number of mutated sessions."""
from __future__ import annotations

import os
import random
import socket
import struct
import subprocess

import pytest

from polyloop import rpc
from polyloop.config import CONFIG
from polyloop.rpc.wire import decode, encode, recv_message
from polyloop.runtime.compiler import compile_c

from rpc.devices import connect, python_env, python_server_command, start

from .test_sanitizers import runtime

EXAMPLES = CONFIG.fuzz_examples or 200
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g")

# a kernel whose behaviour no argument can change: the fuzzer tests the server, not it
KERNEL = ("#include <stdint.h>\n"
          "int32_t nop(void **args, const int64_t *params) { (void)args; (void)params; "
          "return 0; }\n"
          "int64_t nop_workspace_bytes(const int64_t *params) { (void)params; return 64; }\n")


def _frame(message: dict | bytes) -> bytes:
    body = message if isinstance(message, bytes) else encode(message)
    return struct.pack(">I", len(body)) + body


def _requests(library: bytes) -> list[dict]:
    """A correct session after the hello: every request the protocol has."""
    return [{"op": "upload", "data": library},
            {"op": "load", "lib": 0, "entry": "nop", "workspace": "nop_workspace_bytes",
             "threads": 1},
            {"op": "call", "fn": 0, "args": [b"\x01" * 16, 32], "params": [4, 8], "keep": [0, 1],
             "number": 2, "repeat": 2, "min_repeat_ms": 0, "timeout_ms": 5000},
            {"op": "unload", "lib": 0},
            {"op": "bye"}]


WRONG_VALUES = [None, True, -1, 2**63 - 1, -2**63, 1.5, "x" * 300, b"\x00" * 3, [], [[]] * 20,
                {"a": 1}, "nop\x00", "../lib0.so", 10**9]


def _mutate(rng: random.Random, message: dict) -> bytes:
    """One mutated frame of ``message``."""
    kind = rng.randrange(6)
    if kind == 0:               # a field of the wrong type, or an unknown one
        m = dict(message)
        m[rng.choice([*m, "extra"])] = rng.choice(WRONG_VALUES)
        return _frame(m)
    frame = bytearray(_frame(message))
    if kind == 1:               # flipped bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(frame))
            frame[i] ^= 1 << rng.randrange(8)
    elif kind == 2:             # truncated (the connection then ends)
        del frame[rng.randrange(1, len(frame)):]
    elif kind == 3:             # a type byte that lies about what follows
        i = rng.randrange(4, len(frame))
        frame[i] = rng.choice([0xc1, 0xc4, 0xc6, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xcf, 0xd3,
                               0x9f, 0x8f, 0xbf])
    elif kind == 4:             # a frame length that lies
        frame[:4] = struct.pack(">I", rng.choice([0, 1, len(frame) + 9, 2**31, 2**32 - 1]))
    else:                       # garbage
        frame = bytearray(_frame(bytes(rng.randrange(256) for _ in range(rng.randrange(40)))))
    return bytes(frame)


def _fuzz_session(host: str, port: int, rng: random.Random, library: bytes) -> None:
    requests = _requests(library)
    with socket.create_connection((host, port), timeout=10) as s:
        s.recv(1 << 16)
        hello = {"op": "hello", "version": 1, "mac": None}
        if rng.random() < 0.15:
            s.sendall(_mutate(rng, hello))
        else:
            s.sendall(_frame(hello))
            at = rng.randrange(len(requests))
            s.sendall(b"".join(_frame(m) for m in requests[:at]))
            s.sendall(_mutate(rng, requests[at]))
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(1 << 16):
                pass
        except OSError:
            pass


def _check_still_serving(server) -> None:
    with connect(server) as remote:
        answer = remote.request({"op": "upload", "data": _library()}, "upload")
        fn = remote.request({"op": "load", "lib": answer["lib"], "entry": "nop"}, "load")["fn"]
        done = remote.request({"op": "call", "fn": fn, "args": [b"\x07" * 8], "params": [],
                               "keep": [0]}, "call")
        assert done["status"] == 0 and done["outputs"] == [b"\x07" * 8]


def _library() -> bytes:
    return compile_c(KERNEL, name="fuzz_nop").path.read_bytes()


def _check_every_request(server, library: bytes) -> None:
    """The fuzzer's template is itself a correct session (else the mutations test little)."""
    with socket.create_connection((server.host, server.port), timeout=30) as s:
        recv_message(s, 1 << 16)
        s.sendall(_frame({"op": "hello", "version": 1, "mac": None}))
        for m in _requests(library):
            s.sendall(_frame(m))
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    answers = []
    while data:
        (n,) = struct.unpack(">I", data[:4])
        answers.append(decode(data[4:4 + n]))
        data = data[4 + n:]
    assert [a["ok"] for a in answers] == [True] * 6, answers
    assert answers[3]["status"] == 0 and len(answers[3]["times"]) == 2
    assert answers[3]["outputs"] == [b"\x01" * 16, bytes(32)]


def _run_fuzzer(server, examples: int, seed: int) -> None:
    rng = random.Random(seed)
    library = _library()
    _check_every_request(server, library)
    for _ in range(examples):
        _fuzz_session(server.host, server.port, rng, library)
    _check_still_serving(server)
    assert server.proc.poll() is None, "the server died"


def test_the_c_server_survives_the_fuzzer_with_sanitizers(tmp_path):
    if runtime("libasan.so") is None:
        pytest.skip(f"{CONFIG.cc} has no AddressSanitizer runtime (libasan)")
    binary = rpc.build_server("c", tmp_path / "server-asan", extra_flags=SANITIZE)
    refused = subprocess.run([str(binary), "--host", "0.0.0.0"], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode == 2 and "needs a key" in refused.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1")
    server = start([str(binary), "--port", "0", "--max-sessions", "8", "--session-timeout", "5",
                    "--max-upload", "1000000"], env=env)
    try:
        _run_fuzzer(server, EXAMPLES, seed=1)
    finally:
        err = server.stop()
    assert "Sanitizer" not in err and "runtime error" not in err, err[-4000:]


def test_the_python_server_survives_the_fuzzer():
    server = start(python_server_command("--max-sessions", "8", "--session-timeout", "5"),
                   env=python_env())
    try:
        _run_fuzzer(server, max(10, EXAMPLES // 4), seed=2)
    finally:
        err = server.stop()
    assert "Traceback" not in err, err[-4000:]
