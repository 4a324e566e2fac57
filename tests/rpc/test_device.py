# SPDX-License-Identifier: Apache-2.0
"""Programs built here for aarch64 run on an emulated device (the C server under qemu-aarch64,
on loopback) and match NumPy and PyTorch: the seed's "program your phone from your laptop"
example (also on 32-bit ARM and RISC-V) and kernels from the three front ends (the seed CNN:
``tests/graph/test_remote_seed_cnn.py``). A kernel that crashes or hangs ends only its session. Timings under emulation are not
performance figures: only that they are measured is checked."""
from __future__ import annotations

import time

import numpy as np
import pytest

import polyloop as pl
from polyloop.cli import main
from polyloop.rpc.protocol import SessionLost
from polyloop.runtime.compiler import compile_c
from polyloop.runtime.target import Target

from matmul_checks import check_matmul  # tests/ is on sys.path (rootdir conftest)

from .devices import connect, qemu_command, require_qemu, start
from .programs import matmul

AARCH64 = "c -mtriple=aarch64-linux-gnu"


def _seed_example():
    """The seed's ``myfunc``: B = A + 1 over 1024 floats, split and vectorized."""
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = pl.Schedule(B, name="myfunc")
    xo, xi = sch.split(sch.get_loops("B")[0], factors=[None, 32])
    sch.vectorize(xi)
    return sch


def _run_seed_example(remote, rng):
    lib = pl.build(_seed_example(), target=remote.target, name="myfunc")
    f = remote.load_module(remote.upload(lib))
    a = rng.uniform(size=1024).astype("float32")
    b = np.zeros(1024, dtype="float32")
    seconds = f.benchmark(a, b, number=10, repeat=3)
    f(a, b)
    np.testing.assert_equal(b, a + 1)
    assert seconds > 0 and len(f.last_times) == 3


def test_seed_example_on_aarch64(remote, rng):
    assert remote.target == AARCH64 and remote.info["machine"] == "aarch64"
    _run_seed_example(remote, rng)


@pytest.mark.parametrize("triple", ["arm-linux-gnueabihf", "riscv64-linux-gnu"])
def test_seed_example_on_32_bit_arm_and_riscv(triple, tmp_path, rng):
    require_qemu(triple)
    assert main(["rpc", "build-server", "--target", triple, "-o", str(tmp_path / "server")]) == 0
    server = start(qemu_command(triple, tmp_path / "server"))
    try:
        with connect(server) as remote:
            assert remote.target == f"c -mtriple={triple}"
            _run_seed_example(remote, rng)
    finally:
        server.stop()


def test_te_kernel_with_a_schedule_at_awkward_sizes(remote, rng):
    sch = pl.Schedule(matmul(pl.var("n"), pl.var("m"), pl.var("p")))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, kk, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    f = remote.load_module(remote.upload(pl.build(sch, target=remote.target)))
    check_matmul(f, [(19, 29, 23), (8, 3, 1)], rng)    # outputs poisoned: all written
    a = np.ones((4, 5), "float32")
    with pytest.raises(pl.ArgumentError, match="inconsistent size 'p'"):
        f(a, a)                                       # refused here, nothing sent


def test_kernel_from_make_kernel(remote, rng):
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }",
                         "out[i, j] = 2*a[i, j] + b[j]")
    knl = pl.split_iname(knl, "j", 4)
    f = remote.load_module(remote.upload(pl.build(knl, target=remote.target)))
    a = rng.standard_normal((7, 13)).astype("float32")
    b = rng.standard_normal(13).astype("float32")
    np.testing.assert_allclose(f(a=a, b=b), 2 * a + b, rtol=1e-6)


@pl.script
def smooth(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
    for i in range(1, n - 1):
        B[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0


def test_kernel_from_a_python_script_built_here_for_this_machine(remote, rng):
    mod = pl.build(smooth)          # built for this machine: upload builds it for the device
    f = remote.load_module(remote.upload(mod))
    assert f.built.target == AARCH64
    a = rng.standard_normal(41)
    b = np.zeros(41)
    f(a, b)
    np.testing.assert_allclose(b[1:-1], (a[:-2] + a[1:-1] + a[2:]) / 3.0, rtol=1e-13)


def test_an_index_fault_on_the_device_names_the_access(remote):
    n, m = pl.var("n"), pl.var("m")
    idx = pl.placeholder((n,), "int32", name="idx")
    X = pl.placeholder((m,), "float32", name="X")
    Y = pl.compute((n,), lambda i: X[idx[i]], name="Y")
    f = remote.load_module(remote.upload(pl.build(Y, target=remote.target)))
    x = np.arange(5, dtype="float32")
    np.testing.assert_equal(f(np.array([4, 0, 2], "int32"), x), [4, 0, 2])
    with pytest.raises(pl.IndexOutOfBounds, match="index 7 in dimension 0, outside 0..4"):
        f(np.array([1, 7], "int32"), x)


def test_a_crash_or_a_hang_ends_only_its_session(aarch64_device):
    crash = ("#include <stdint.h>\nint32_t boom(void **args, const int64_t *params) {\n"
             "    volatile int *p = (int *)(intptr_t)params[0]; return *p; }\n"
             "int32_t spin(void **args, const int64_t *params) {\n"
             "    for (volatile int64_t i = 0; i >= 0; i += params[0]) {} return 0; }\n")
    lib = compile_c(crash, name="crash", target=Target("aarch64-linux-gnu"))
    work = aarch64_device.work_dir
    for entry in ("boom", "spin"):
        remote = connect(aarch64_device)
        number = remote.request({"op": "upload", "data": lib.path.read_bytes()}, "upload")["lib"]
        # the library is written into the session's own directory, under the server's name
        assert [p.name for p in work.glob("*/*")] == ["lib0.so"]
        fn = remote.request({"op": "load", "lib": number, "entry": entry}, "load")["fn"]
        with pytest.raises(SessionLost):
            remote.request({"op": "call", "fn": fn, "args": [], "params": [0],
                            "timeout_ms": 1000}, entry)
        assert not remote.alive        # a crash, or the server's time limit (1 s) ending it
        for _ in range(100):           # the server removes what the dead session left
            if not any(work.iterdir()):
                break
            time.sleep(0.05)
        assert not any(work.iterdir())
    with connect(aarch64_device) as remote:          # the server goes on
        assert remote.info["impl"] == "c"

