# SPDX-License-Identifier: Apache-2.0
"""``pl.rpc.Runner``: measure tuning candidates on a device.

``pl.tune(C, runner=pl.rpc.Runner(tracker=(host, port), key="rk3588"))`` builds every
candidate on this machine for the device's target (the runner's ``target``, which the tuner
builds for) and measures it there: the library is uploaded, called once on the tuner's inputs
with its outputs poisoned (the tuner compares them with the default schedule's), timed, and
unloaded. The device comes from a tracker (``tracker=``, a device of ``key``) or is given
(``device=(host, port)``). A device that crashes or hangs costs the candidate it was running:
the runner gives the device back as failed, takes another (or the same, once its server is
up again) and goes on.

>>> runner = pl.rpc.Runner(tracker=("127.0.0.1", 9190), key="rk3588")   # doctest: +SKIP
>>> res = pl.tune(C, trials=32, runner=runner)                          # doctest: +SKIP
"""
from __future__ import annotations

import logging
import traceback
from typing import Any

import numpy as np

from ..errors import PolyloopError
from ..ir.program import BufferRole
from ..ir.shapes import evaluate
from ..runtime.binding import Binder
from ..runtime.records import Status
from ..tune.measure import RunResult, _poisoned
from .client import Remote, RemoteLibrary, _copy_back, connect, raw_bytes
from .protocol import RemoteError, SessionLost, as_key
from .tracker import TrackerClient

log = logging.getLogger("polyloop.rpc")


class Runner:
    """Runs tuning candidates on a device (see the module docstring). ``key``: the device key
    of the tracker's pool; ``secret``: the shared key of the tracker and the devices, when
    they have one. ``timeout``: seconds one candidate may take there (upload, call, timing);
    ``repeat``, ``number``, ``min_repeat_ms``: the timing (TVM's ``time_evaluator``); ``wait``:
    seconds to wait for a free device."""

    def __init__(self, *, tracker: tuple[str, int] | None = None, key: str | None = None,
                 device: tuple[str, int] | None = None, secret: str | bytes | None = None,
                 timeout: float = 60.0, repeat: int = 3, number: int = 1,
                 min_repeat_ms: int = 20, wait: float = 120.0) -> None:
        if (tracker is None) == (device is None):
            raise PolyloopError("pl.rpc.Runner needs tracker=(host, port) with key=..., or "
                                "device=(host, port)")
        if tracker is not None and not key:
            raise PolyloopError("pl.rpc.Runner(tracker=...) needs key=: the device key the "
                                "devices registered with (--device-key)")
        self.tracker_address, self.device_key, self.device = tracker, key, device
        self.secret = as_key(secret)
        self.timeout, self.repeat, self.number = timeout, repeat, number
        self.min_repeat_ms, self.wait = min_repeat_ms, wait
        self._tracker: TrackerClient | None = None
        self._lease: int | None = None
        self._remote: Remote | None = None
        self._target: str | None = None
        self._inputs: tuple[dict, dict] = ({}, {})

    @property
    def target(self) -> str:
        """The target string of the device (the tuner builds candidates for it)."""
        if self._target is None:
            self._connect()
        assert self._target is not None
        return self._target

    def set_inputs(self, inputs: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        self._inputs = (inputs, sizes)

    def run(self, kernel: Any, repeat: int | None = None) -> RunResult:
        """Outputs and times of ``kernel`` (a ``tune.measure.KernelSpec`` built for the
        device's target) on the device; ``repeat=0``: outputs only."""
        repeat = self.repeat if repeat is None else repeat
        try:
            remote = self._connect()
            library = RemoteLibrary(remote, int(remote.request(
                {"op": "upload", "data": kernel.library.path.read_bytes()}, "upload")["lib"]),
                kernel)
            try:
                return self._measure(remote, library, kernel, repeat)
            finally:
                if remote.alive:
                    remote.unload(library)
        except RemoteError as e:      # the device refused or failed this candidate
            return RunResult(Status.RUN_ERROR, error=str(e))
        except SessionLost as e:      # the device crashed, hung or was stopped
            self._lost(str(e))
            return RunResult(Status.TIMEOUT if e.timed_out else Status.RUN_ERROR, error=str(e))
        except PolyloopError as e:    # no device (the tracker has none free, a refusal)
            self._lost(str(e))
            return RunResult(Status.RUN_ERROR, error=str(e))
        except Exception:   # noqa: BLE001 - a bug here costs the candidate, not the search
            self._lost("runner error")
            return RunResult(Status.RUN_ERROR, error=traceback.format_exc(limit=4))

    def _measure(self, remote: Remote, library: RemoteLibrary, kernel: Any,
                 repeat: int) -> RunResult:
        inputs, sizes = self._inputs
        fn = int(remote.request({"op": "load", "lib": library.number, "entry": kernel.entry},
                                f"load {kernel.entry}")["fn"])
        binder = Binder(kernel.entry, tuple(kernel.args), tuple(kernel.params))
        arrays = {k: v.copy() for k, v in inputs.items()}
        for b in kernel.args:
            if b.role is BufferRole.OUTPUT:
                shape = tuple(int(evaluate(d, sizes)) for d in b.shape)
                arrays[b.name] = _poisoned(shape, b.dtype.numpy)
        bound, _, plan = binder.bind((), {**arrays, **sizes})
        args = [raw_bytes(a) for a in bound]
        written = [i for i, b in enumerate(kernel.args) if b.role is not BufferRole.INPUT]
        call = {"op": "call", "fn": fn, "args": args, "params": [int(p) for p in plan.params],
                "timeout_ms": int(self.timeout * 1000)}
        answer = remote.request({**call, "keep": written}, f"call {kernel.entry}")
        if answer.get("status") != 0:
            return RunResult(Status.RUN_ERROR, error=f"{kernel.entry} returned status "
                                                     f"{answer.get('status')} on the device")
        outputs = {}
        for i, data in zip(written, answer["outputs"]):
            out = np.empty_like(bound[i])
            _copy_back(out, data, f"call {kernel.entry}")
            outputs[kernel.args[i].name] = out
        times: tuple[float, ...] = ()
        if repeat:
            timed = remote.request({**call, "keep": [], "number": self.number,
                                    "repeat": repeat, "min_repeat_ms": self.min_repeat_ms},
                                   f"time {kernel.entry}")
            times = tuple(float(t) for t in timed.get("times", ()))
        return RunResult(Status.OK, times, outputs)

    # the device ---------------------------------------------------------------------------------
    def _connect(self) -> Remote:
        """The session with the current device, opening one (from the tracker) if needed."""
        if self._remote is not None:
            return self._remote
        if self.device is not None:
            host, port = self.device
        else:
            if self._tracker is None:
                host_t, port_t = self.tracker_address  # type: ignore[misc]
                self._tracker = TrackerClient(host_t, port_t, key=self.secret,
                                              timeout=self.timeout)
            lease = self._tracker.request(self.device_key or "", wait=self.wait)
            self._lease, host, port = int(lease["lease"]), str(lease["host"]), int(lease["port"])
        try:
            self._remote = connect(host, port, key=self.secret, timeout=self.timeout)
        except PolyloopError:
            self._lost("cannot connect")
            raise
        target = self._remote.target
        if self._target is not None and target != self._target:
            log.warning("device %s:%s runs '%s', the tuning builds for '%s'", host, port, target,
                        self._target)
        self._target = self._target or target
        return self._remote

    def _lost(self, why: str) -> None:
        """Give the device back as failed; the next run takes another."""
        log.info("device session lost (%s)", why.strip()[-200:])
        if self._remote is not None:
            self._remote._drop()
            self._remote = None
        if self._tracker is not None and self._lease is not None:
            try:
                self._tracker.release(self._lease, failed=True)
            except PolyloopError:
                self._tracker.close()
                self._tracker = None
        self._lease = None

    def close(self) -> None:
        """End the session and give the device back."""
        if self._remote is not None:
            self._remote.close()
            self._remote = None
        if self._tracker is not None:
            if self._lease is not None:
                try:
                    self._tracker.release(self._lease)
                except PolyloopError:
                    pass
            self._tracker.close()
            self._tracker = None
        self._lease = None

