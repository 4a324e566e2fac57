# SPDX-License-Identifier: Apache-2.0
"""The host side of RPC: ``pl.rpc.connect`` a device, upload a kernel or a model built for
it, load it, call it on NumPy arrays (copied there and back) and time it there.

Arguments are checked here, as a local call checks them, before anything is sent: a wrong
shape or dtype is an ``ArgumentError`` on this machine, never a kernel reading out of bounds
on the device. An error on the device arrives as a ``RemoteError`` (a ``PolyloopError``) with
the device's message.

>>> remote = pl.rpc.connect("127.0.0.1", 9090)        # doctest: +SKIP
>>> f = remote.load_module(remote.upload(mod))        # doctest: +SKIP
>>> c = f(a, b); seconds = f.benchmark(a, b)          # doctest: +SKIP
"""
from __future__ import annotations

import os
import socket
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..driver import build as build_kernel
from ..errors import PolyloopError
from ..graph.build import compile_graph
from ..graph.cross import CrossModel, bind_model_inputs
from ..graph.executor import Executor
from ..graph.index_checks import index_checks
from ..runtime.cross import CrossModule
from ..runtime.kernel import returned
from ..runtime.module import Module, kernel_failure
from ..runtime.target import Target
from .protocol import (DEFAULT_PORT, RemoteError, SessionLost, as_key, client_handshake,
                       expect_ok)
from .wire import ProtocolError, recv_message, send_message

DEFAULT_TIMEOUT = 120.0


def connect(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, key: str | bytes | None = None,
            timeout: float = DEFAULT_TIMEOUT) -> "Remote":
    """Open a session with the RPC server at ``host:port`` (``polyloop rpc server``, or the C
    server on a device); ``key``: the server's shared key, when it has one. ``timeout``:
    seconds any one request may take (a call included).

    >>> remote = pl.rpc.connect("127.0.0.1", 9090, key="s3cret")   # doctest: +SKIP
    >>> remote.target                                               # doctest: +SKIP
    'c -mtriple=aarch64-linux-gnu'
    """
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise PolyloopError(f"cannot connect to the RPC server at {host}:{port}: {e.strerror or e}"
                            "; start one there (polyloop rpc server, or the device's C server "
                            "from polyloop rpc build-server)") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        hello = client_handshake(sock, as_key(key), role="server")
    except (OSError, PolyloopError):
        sock.close()
        raise
    return Remote(sock, hello, f"{host}:{port}", timeout)


@dataclass(frozen=True)
class RemoteLibrary:
    """A library uploaded in a session: its number there and what it holds."""

    remote: "Remote"
    number: int
    built: Any                 # the module or model it was built as


class Remote:
    """A session with an RPC server (see ``connect``). ``target``: the target string to build
    for that device; ``info``: what the server said about itself."""

    def __init__(self, sock: socket.socket, hello: dict, address: str, timeout: float) -> None:
        self._sock = sock
        self.address = address
        self.timeout = timeout
        self.info = {k: v for k, v in hello.items() if k != "nonce"}
        self.target = str(hello.get("target", ""))
        self._max_frame = int(hello.get("max_frame", 1 << 28))

    @property
    def alive(self) -> bool:
        """Whether the session is open (a lost or closed one is not)."""
        return self._sock is not None

    @property
    def target_object(self) -> Target:
        """The device's target as a ``pl.Target``."""
        return Target.parse(self.target)

    def request(self, message: dict, what: str) -> dict:
        """Send one request and return the answer; RemoteError when the device refuses it,
        SessionLost when the session ends."""
        if self._sock is None:
            raise PolyloopError(f"the session with {self.address} is closed; connect again")
        try:
            send_message(self._sock, message)
            answer = recv_message(self._sock, max(self._max_frame, 1 << 30))
        except TimeoutError:
            self._drop()
            raise SessionLost(f"{what}: the device at {self.address} did not answer within "
                              f"{self.timeout:g} s; the session is closed", timed_out=True
                              ) from None
        except (OSError, ProtocolError) as e:
            self._drop()
            raise SessionLost(f"{what}: the session with {self.address} ended ({e}); the "
                              "device may have crashed, or the kernel ran past its time "
                              "limit") from None
        if answer.get("fatal"):
            self._drop()
        return expect_ok(answer, what)

    def upload(self, built: object) -> RemoteLibrary:
        """Send a kernel module (``pl.build``) or a model (``pl.graph.build``) to the device.
        One built for the device's target is sent as it is; one built for this machine is
        built again for the device (a kernel from its schedule, a model from its optimized
        graph) unless the device is this machine's kind."""
        built = self._for_device(built)
        data = built.library.path.read_bytes()
        answer = self.request({"op": "upload", "data": data}, "upload")
        return RemoteLibrary(self, int(answer["lib"]), built)

    def load_module(self, library: RemoteLibrary, *, threads: int | None = None
                    ) -> "RemoteKernel | RemoteModel":
        """The uploaded kernel or model, callable here and run there. ``threads``: OpenMP
        threads on the device (default: its own setting, usually one per core)."""
        if not isinstance(library, RemoteLibrary) or library.remote is not self:
            raise PolyloopError("load_module takes what remote.upload(...) returned in this "
                                "session")
        built = library.built
        model = isinstance(built, (Executor, CrossModel))
        entry = _model_entry(built) if model else built.entry
        message = {"op": "load", "lib": library.number, "entry": entry,
                   "workspace": f"{entry}_workspace_bytes" if model else None}
        if threads is not None:
            message["threads"] = int(threads)
        answer = self.request(message, f"load {entry}")
        cls = RemoteModel if model else RemoteKernel
        return cls(self, int(answer["fn"]), built, library)

    def unload(self, library: RemoteLibrary) -> None:
        """Close the library on the device and delete its file there."""
        self.request({"op": "unload", "lib": library.number}, "unload")

    def close(self) -> None:
        """End the session (the device deletes what was uploaded in it)."""
        if self._sock is not None:
            try:
                send_message(self._sock, {"op": "bye"})
                recv_message(self._sock, 1 << 16)
            except (OSError, PolyloopError):
                pass
            self._drop()

    def __enter__(self) -> "Remote":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Remote {self.address} target={self.target!r} {self.info.get('impl')} server>"

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None

    def _for_device(self, built: object) -> object:
        """``built`` as a library the device can load (see ``upload``)."""
        device = self.target_object
        if isinstance(built, (CrossModule, CrossModel)):
            if built.target_object.triple != device.triple:
                raise PolyloopError(f"this library was built for '{built.target}', the device "
                                    f"at {self.address} runs '{self.target}'; build with "
                                    f"target=remote.target")
            return built
        if isinstance(built, (Module, Executor)) and device.runs_here:
            return built
        if isinstance(built, Module):
            if built.target != "c" or getattr(built, "schedule", None) is None:
                raise PolyloopError(f"cannot build module '{built.entry}' again for the device "
                                    f"'{self.target}'; build it with target=remote.target")
            return build_kernel(built.schedule, target=device, name=built.entry)
        if isinstance(built, Executor):
            return compile_graph(built.graph, target=device)
        raise PolyloopError(f"upload takes a module of pl.build or a model of pl.graph.build, "
                            f"got {type(built).__name__}")


def _model_entry(built: Executor | CrossModel) -> str:
    if isinstance(built, CrossModel):
        return built.entry
    if len(built.segments) != 1 or built.segments[0].entry is None:
        raise PolyloopError(f"model '{built.graph.name}' calls extern Python functions, which "
                            "a device cannot run")
    return built.segments[0].entry


class _RemoteFunction:
    """What a loaded kernel and a loaded model share: the call request and its timing."""

    def __init__(self, remote: Remote, number: int, built: Any, library: RemoteLibrary) -> None:
        self.remote, self.number, self.built, self.library = remote, number, built, library
        self.last_times: tuple[float, ...] = ()

    def _call(self, args: list, params: list[int], keep: list[int], *, number: int = 0,
              repeat: int = 1, min_repeat_ms: int = 0) -> dict:
        timeout_ms = int(self.remote.timeout * 1000)
        answer = self.remote.request(
            {"op": "call", "fn": self.number, "args": args, "params": [int(p) for p in params],
             "keep": keep, "number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
             "timeout_ms": timeout_ms}, f"call {self.name}")
        outputs = answer.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != len(keep):
            raise RemoteError(f"call {self.name}: the device sent {len(outputs or [])} outputs "
                              f"for {len(keep)} requested")
        return answer

    @property
    def name(self) -> str:
        raise NotImplementedError

    def _times(self, answer: dict) -> float:
        times = tuple(float(t) for t in answer.get("times", ()))
        if not times:
            raise RemoteError(f"benchmark {self.name}: the device sent no timings")
        self.last_times = times
        return statistics.median(times)


def _timing(number: int, repeat: int, min_repeat_ms: int) -> dict:
    if number < 1 or repeat < 1 or min_repeat_ms < 0:
        raise PolyloopError(f"benchmark() needs number >= 1, repeat >= 1 and min_repeat_ms >= 0, "
                            f"got number={number}, repeat={repeat}, "
                            f"min_repeat_ms={min_repeat_ms}")
    return {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms}


def raw_bytes(array: np.ndarray) -> memoryview:
    """The bytes of ``array`` in C order, without a copy when it is C-contiguous (any size,
    empty or 0-d included)."""
    return memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _copy_back(array: np.ndarray, data: object, what: str) -> None:
    if not isinstance(data, bytes) or len(data) != array.nbytes:
        raise RemoteError(f"{what}: the device sent {len(data) if isinstance(data, bytes) else 0}"
                          f" bytes for an array of {array.nbytes}")
    array.reshape(-1)[...] = np.frombuffer(data, dtype=array.dtype)


class RemoteKernel(_RemoteFunction):
    """A kernel loaded on the device: called like the module (arrays by position or name,
    outputs allocated and returned when not passed), run there."""

    @property
    def name(self) -> str:
        return self.built.entry

    def _request(self, positional: tuple, named: dict) -> tuple[list, Any, list, list[int]]:
        arrays, plan = self.built.bind(positional, named)
        allocated = {i for i, _ in plan.allocations}
        args: list = []
        for i, (slot, a) in enumerate(zip(self.built.args, arrays)):
            # an output polyloop allocated is zeros there (as here); everything else travels
            args.append(a.nbytes if i in allocated else raw_bytes(a))
        keep = [i for i, b in enumerate(self.built.args) if b.role.value != "input"]
        return arrays, plan, args, keep

    def __call__(self, *positional: object, **named: object) -> object:
        arrays, plan, args, keep = self._request(positional, named)
        answer = self._call(args, list(plan.params), keep)
        self._check(answer)
        for i, data in zip(keep, answer["outputs"]):
            _copy_back(arrays[i], data, f"call {self.name}")
        return returned(arrays, plan)

    def benchmark(self, *positional: object, number: int = 1, repeat: int = 10,
                  min_repeat_ms: int = 1, **named: object) -> float:
        """Median seconds of one call on the device: after one call, ``repeat`` timings of
        ``number`` calls each, a timing shorter than ``min_repeat_ms`` taken again with more
        calls (TVM's ``time_evaluator``); ``last_times`` keeps every timing.

        >>> seconds = f.benchmark(a, b, repeat=5)   # doctest: +SKIP
        """
        timing = _timing(number, repeat, min_repeat_ms)
        arrays, plan, args, keep = self._request(positional, named)
        answer = self._call(args, list(plan.params), [], **timing)
        self._check(answer)
        return self._times(answer)

    def _check(self, answer: dict) -> None:
        status = answer.get("status")
        if status == 0:
            return
        fault = answer.get("fault")
        error = kernel_failure(self.name, int(status) if isinstance(status, int) else -1,
                               tuple(self.built.index_sites),
                               tuple(fault) if isinstance(fault, list) else None)
        why = answer.get("why")
        raise type(error)(f"{error} (on the device at {self.remote.address}"
                          + (f": {why})" if isinstance(why, str) and why else ")"))


class RemoteModel(_RemoteFunction):
    """A model loaded on the device: ``f(x)`` returns the outputs as NumPy arrays."""

    def __init__(self, remote: Remote, number: int, built: Any, library: RemoteLibrary) -> None:
        super().__init__(remote, number, built, library)
        self._checks = index_checks(built.graph)

    @property
    def name(self) -> str:
        return self.built.graph.name

    def _request(self, inputs: tuple) -> tuple[list, list[int], list[np.ndarray]]:
        arrays, params, outputs = bind_model_inputs(self.built.graph, self._checks, inputs)
        outs = [np.empty(shape, dtype) for shape, dtype in outputs]
        args = [raw_bytes(a) for a in arrays] + [o.nbytes for o in outs]
        return args, params, outs

    def __call__(self, *inputs: object) -> np.ndarray | tuple[np.ndarray, ...]:
        args, params, outs = self._request(inputs)
        first = len(args) - len(outs)
        answer = self._call(args, params, list(range(first, len(args))))
        self._check(answer)
        for o, data in zip(outs, answer["outputs"]):
            _copy_back(o, data, f"model {self.name}")
        return outs[0] if len(outs) == 1 else tuple(outs)

    def benchmark(self, *inputs: object, number: int = 1, repeat: int = 10,
                  min_repeat_ms: int = 1) -> float:
        """Median seconds of one run on the device (as ``RemoteKernel.benchmark``)."""
        timing = _timing(number, repeat, min_repeat_ms)
        args, params, _ = self._request(inputs)
        answer = self._call(args, params, [], **timing)
        self._check(answer)
        return self._times(answer)

    def _check(self, answer: dict) -> None:
        status = answer.get("status")
        if status != 0:
            raise PolyloopError(f"model '{self.name}' failed with status {status} on the device "
                                f"at {self.remote.address} (1: out of memory)")


def read_key_file(path: str | os.PathLike) -> bytes:
    """A key kept in a file (trailing newlines dropped), as ``--key-file`` reads it."""
    try:
        with open(path, "rb") as f:
            return f.read().rstrip(b"\r\n")
    except OSError as e:
        raise PolyloopError(f"cannot read the key file {path}: {e.strerror}") from None
