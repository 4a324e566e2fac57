# SPDX-License-Identifier: Apache-2.0
"""Tuning for the GPU targets: pl.tune(target="opencl") on the CPU's OpenCL (PoCL) gives a
GPU schedule (work-groups, work-items) that is not the default one and computes what NumPy
computes (outputs poisoned, sizes that divide no tile, symbolic sizes); an OpenCL candidate
that crashes its runner or does not compile is recorded and the search goes on; the GPU space
(rules_gpu) draws schedules of several kinds of program that compute the right result, and
compile for CUDA with nvcc; target="cuda" without a CUDA device is refused clearly."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import polyloop as pl
from polyloop import cli
from polyloop.runtime.cuda import device_available
from polyloop.runtime.cuda_compiler import nvcc_available
from polyloop.runtime.records import Status
from polyloop.schedule.sampling import decisions_of
from polyloop.schedule.trace import Trace
from polyloop.tune.measure import LocalRunner, OpenCLKernelSpec, build_one
from polyloop.tune.rules_gpu import gpu_space
from polyloop.tune.space import draw

pytest.importorskip("pyopencl", reason="OpenCL tuning needs PyOpenCL (the opencl extra)")
from polyloop.runtime.opencl import platform_available  # noqa: E402

OPENCL, OPENCL_WHY = platform_available()
needs_opencl = pytest.mark.skipif(not OPENCL, reason=f"no OpenCL device: {OPENCL_WHY}")


class InProcessBuilder:
    """Builds in this process (fast for a test); the runner still runs each candidate in its
    worker process."""

    def build(self, jobs):
        return [build_one(j) for j in jobs]


def matmul_relu(n, m, l):
    A = pl.placeholder((n, l), "float32", name="A")
    B = pl.placeholder((l, m), "float32", name="B")
    k = pl.reduce_axis((0, l), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return pl.compute((n, m), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")


def is_gpu_schedule(sch) -> bool:
    text = str(sch)
    return "threadIdx.x" in text and "blockIdx" in text


@needs_opencl
def test_opencl_tuning_of_a_symbolic_matmul(tmp_path, rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, 13), "float32", name="A")
    B = pl.placeholder((13, m), "float32", name="B")
    k = pl.reduce_axis((0, 13), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    res = pl.tune(C, target="opencl", trials=2, seed=1, sizes={"n": 21, "m": 19},
                  work_dir=str(tmp_path), builder=InProcessBuilder(),
                  runner=LocalRunner(timeout=60.0, repeat=1))
    assert any(r.status is Status.OK for r in res.history)
    assert len(res.trace) > 0 and is_gpu_schedule(res.schedule)
    mod = res.build()
    assert mod.target == "opencl"
    # the database gives the best OpenCL schedule back to pl.build
    assert pl.build(C, target="opencl", database=str(tmp_path)).source == mod.source
    for rows, cols in [(21, 19), (33, 7)]:     # the measured sizes and others
        a = rng.standard_normal((rows, 13)).astype("float32")
        b = rng.standard_normal((13, cols)).astype("float32")
        c = np.full((rows, cols), np.nan, "float32")
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def outcome_space(sch):
    """Three candidates: a good one, one that crashes its process, one that does not build."""
    kind = sch.sample_categorical(["ok", "crash", "broken"])
    (i,) = sch.get_loops("B")
    outer, inner = sch.split(i, factors=[None, 16 * (1 + ["ok", "crash", "broken"].index(kind))])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")


class SabotagingBuilder:
    """Builds real OpenCL kernels, then breaks the ones whose draw says so."""

    def build(self, jobs):
        out = []
        for job in jobs:
            built = build_one(job)
            kind = (decisions_of(Trace.from_json(job.trace)) or [0])[0]
            if kind and built.kernel is not None:
                built = dataclasses.replace(built, kernel=self._break(built.kernel, kind))
            out.append(built)
        return out

    def _break(self, k: OpenCLKernelSpec, kind: int) -> OpenCLKernelSpec:
        assert isinstance(k, OpenCLKernelSpec)
        head = k.source.index("{", k.source.index("__kernel ")) + 1
        body = ("((__global volatile float *)B)[1L << 40] = 1.0f;" if kind == 1
                else "this is not OpenCL;")
        return dataclasses.replace(k, source=k.source[:head] + body + k.source[head:])


@needs_opencl
def test_a_crashing_opencl_candidate_is_recorded_and_the_search_goes_on(tmp_path):
    A = pl.placeholder((300,), "float32", name="A")
    B = pl.compute((300,), lambda i: A[i] * 2.0, name="B")
    res = pl.tune(B, target="opencl", trials=3, strategy="random", space=outcome_space,
                  seed=0, work_dir=str(tmp_path), builder=SabotagingBuilder(),
                  runner=LocalRunner(timeout=60.0, repeat=1))
    status = {json.loads(r.trace)[0]["kwargs"]["decision"]: r.status for r in res.history}
    assert status == {0: Status.OK, 1: Status.RUN_ERROR, 2: Status.RUN_ERROR}
    errors = sorted(r.error for r in res.history if r.status is Status.RUN_ERROR)
    assert "crashed its worker process" in errors[1]
    assert "rejected the generated code" in errors[0]
    assert decisions_of(res.trace) == [0]
    a = np.arange(300, dtype="float32")
    np.testing.assert_array_equal(res.build()(a), a * 2.0)


def conv2d():
    X = pl.placeholder((1, 3, 9, 10), "float32", name="X")
    W = pl.placeholder((4, 3, 3, 3), "float32", name="W")
    rc = pl.reduce_axis((0, 3), name="rc")
    ry = pl.reduce_axis((0, 3), name="ry")
    rx = pl.reduce_axis((0, 3), name="rx")
    Y = pl.compute((1, 4, 7, 8), lambda b, f, y, x: pl.sum(
        X[b, rc, y + ry, x + rx] * W[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")

    def ref(x, w):
        out = np.zeros((1, 4, 7, 8), "float32")
        for ry_ in range(3):
            for rx_ in range(3):
                out += np.einsum("bcyx,fc->bfyx", x[:, :, ry_:ry_ + 7, rx_:rx_ + 8],
                                 w[:, :, ry_, rx_])
        return out
    return Y, [(1, 3, 9, 10), (4, 3, 3, 3)], ref


def row_sums():
    n = pl.var("n")
    A = pl.placeholder((n, 6), "float32", name="A")
    k = pl.reduce_axis((0, 6), name="k")
    S = pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k), name="S")
    return S, [(37, 6)], lambda a: a.sum(axis=1)


def scaled_add():
    n = pl.var("n")
    A = pl.placeholder((n, 5), "float32", name="A")
    B = pl.compute((n, 5), lambda i, j: A[i, j] * 3.0, name="B")
    C = pl.compute((n, 5), lambda i, j: B[i, j] + A[i, j], name="C")
    return C, [(29, 5)], lambda a: a * 3.0 + a


@needs_opencl
def matmul_relu_case():
    D = matmul_relu(pl.var("n"), 11, 6)
    return D, [(9, 6), (6, 11)], lambda a, b: np.maximum(a @ b, 0.0)


@pytest.mark.parametrize("make, seeds", [(conv2d, 1), (matmul_relu_case, 1), (row_sums, 2),
                                         (scaled_add, 2)])
def test_the_gpu_space_computes_the_program(make, seeds, rng):
    out, shapes, ref = make()
    program = pl.to_program(out)
    for seed in range(seeds):
        sch = draw(program, gpu_space, seed=seed)
        assert is_gpu_schedule(sch)
        mod = pl.build(sch, target="opencl")
        arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
        expected = ref(*arrays)
        got = np.full(expected.shape, np.nan, "float32")
        mod(*arrays, got)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@needs_opencl
def test_a_loop_carrying_a_dependence_stays_in_one_work_item(rng):
    @pl.script
    def prefix(a: pl.Buffer[(40,), "float32"]):
        for i in range(1, 40):
            a[i] = a[i] + a[i - 1]
    sch = draw(prefix, gpu_space, seed=0)
    assert "threadIdx" not in str(sch)
    a = rng.standard_normal(40).astype("float32")
    work = a.copy()
    pl.build(sch, target="opencl")(work)
    np.testing.assert_allclose(work, np.cumsum(a), rtol=1e-5, atol=1e-5)


def test_the_gpu_space_compiles_for_cuda():
    ok, why = nvcc_available()
    if not ok:
        pytest.skip(f"CUDA builds need nvcc: {why}")
    program = pl.to_program(matmul_relu(pl.var("n"), 40, 24))
    mod = pl.build(draw(program, gpu_space, seed=3), target="cuda")
    assert "threadIdx.x" in mod.source and ".entry" in mod.ptx


def test_cuda_tuning_without_a_device_is_refused():
    if device_available()[0]:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(pl.PolyloopError, match="CUDA device"):
        pl.tune(matmul_relu(8, 8, 8), target="cuda", trials=1)


def test_the_command_line_takes_the_target(tmp_path, capsys):
    if device_available()[0]:
        pytest.skip("this machine has a CUDA device")
    (tmp_path / "prog.py").write_text(
        "import polyloop as pl\n"
        "def double():\n"
        "    A = pl.placeholder((8,), 'float32', name='A')\n"
        "    return pl.compute((8,), lambda i: A[i] * 2.0, name='B')\n")
    assert cli.main(["tune", f"{tmp_path / 'prog.py'}:double", "--trials", "1",
                     "--target", "cuda", "--work-dir", str(tmp_path / "wd")]) == 1
    assert "CUDA device" in capsys.readouterr().err
