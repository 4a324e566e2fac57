# SPDX-License-Identifier: Apache-2.0
"""Tuning on devices: ``pl.tune`` with ``pl.rpc.Runner`` builds candidates here for the
device's target and measures them on emulated aarch64 devices shared through a tracker; a
device killed in the middle of the search costs the candidate it was running, and the
search goes on with the other. The tuned kernel matches NumPy on the device."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop import rpc
from polyloop.rpc.tracker import TrackerClient
from polyloop.runtime.records import Status

from polyloop.cli import main

from matmul_checks import check_matmul  # tests/ is on sys.path (rootdir conftest)
from tune.test_frontends import InProcessBuilder

from .devices import connect, python_env, python_server_command, qemu_command, start
from .programs import matmul


KEY = "tr4cker-k3y"


@pytest.fixture
def tracker():
    """A tracker with a key: devices and jobs prove it (HMAC, in C and in Python)."""
    t = rpc.Tracker(rpc.TrackerOptions(port=0, key=KEY.encode(), quarantine=0.5))
    host, port = t.start()
    yield host, port
    t.close()


def _devices(binary, tracker, count):
    host, port = tracker
    return [start(qemu_command("aarch64-linux-gnu", binary, "--key", KEY, "--tracker",
                               f"{host}:{port}", "--device-key", "rk3588"))
            for _ in range(count)]


def _wait_for(tracker, count):
    client = TrackerClient(*tracker, key=KEY.encode())
    try:
        for _ in range(200):
            if len(client.status()) == count:
                return
            __import__("time").sleep(0.05)
        raise AssertionError(f"{count} devices did not register")
    finally:
        client.close()


def test_tune_a_matmul_through_the_tracker_with_a_device_killed(aarch64_server_binary,
                                                                tracker, tmp_path):
    servers = _devices(aarch64_server_binary, tracker, 2)
    try:
        _wait_for(tracker, 2)
        killed = []

        def kill_one(progress):
            if progress.trials == 2 and not killed:
                # the device of the session: its server and sessions die together
                runner_port = runner._remote.address.rsplit(":", 1)[1]
                victim = next(s for s in servers if str(s.port) == runner_port)
                killed.append(victim.stop())

        runner = rpc.Runner(tracker=tracker, key="rk3588", secret=KEY, timeout=60, repeat=1)
        C = matmul(23, 19, 17)
        res = pl.tune(C, trials=5, runner=runner, builder=InProcessBuilder(),
                      work_dir=str(tmp_path), progress=kill_one)
        assert killed, "no device was killed"
        statuses = [r.status for r in res.history]
        assert statuses.count(Status.OK) >= 3, [(r.status, r.error) for r in res.history]
        assert Status.MISMATCH not in statuses
        assert res.target == "c -mtriple=aarch64-linux-gnu"
        _wait_for(tracker, 1)                    # the dead device left the pool
        survivor = next(s for s in servers if s.proc.poll() is None)
        with pytest.raises(rpc.RemoteError, match="wrong key"):
            rpc.connect(survivor.host, survivor.port, key="guess")
        with pytest.raises(rpc.RemoteError, match="requires a key"):
            rpc.connect(survivor.host, survivor.port, key="")
        with connect(survivor, key=KEY) as remote:
            f = remote.load_module(remote.upload(res.build()))
            check_matmul(f, [(23, 19, 17)], np.random.default_rng(0))
    finally:
        for s in servers:
            s.stop()


def test_a_job_that_ends_gives_its_device_back(tracker, capsys):
    host, port = tracker
    server = start(python_server_command("--key", KEY, "--tracker", f"{host}:{port}",
                                         "--device-key", "rk3588"), env=python_env())
    try:
        _wait_for(tracker, 1)
        assert main(["rpc", "status", "--tracker", f"{host}:{port}", "--key", KEY]) == 0
        assert f"rk3588           {server.host}:{server.port}" in capsys.readouterr().out
        with pytest.raises(rpc.RemoteError, match="refused the session: wrong key"):
            TrackerClient(*tracker, key=b"guess")
        first = TrackerClient(*tracker, key=KEY.encode())
        lease = first.request("rk3588", wait=5)
        assert (lease["host"], lease["port"]) == (server.host, server.port)
        second = TrackerClient(*tracker, key=KEY.encode())
        with pytest.raises(rpc.RemoteError, match="no free device of key 'rk3588'"):
            second.request("rk3588", wait=0.2)
        first.close()                             # the job ended: its lease is given back
        assert second.request("rk3588", wait=5)["port"] == server.port
        with pytest.raises(rpc.RemoteError, match="0 registered"):
            second.request("other", wait=0)
        second.close()
    finally:
        server.stop()
