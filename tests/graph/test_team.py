# SPDX-License-Identifier: Apache-2.0
"""A model's kernels in one parallel region (graph/team.py): whole models against PyTorch at 2
threads, on fresh data at every call, outputs poisoned with NaN; kernels split among the team,
kernels on one thread, independent branches, an extern call between two regions, a symbolic
batch; and a build without the waits between kernels, which must give wrong values."""
from __future__ import annotations

import ctypes
import dataclasses

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen.team import TeamRole
from polyloop.graph import Op, team
from polyloop.graph.build import _generate, optimize

torch = pytest.importorskip("torch", reason="the models are checked against PyTorch")
F = torch.nn.functional

RNG = np.random.default_rng(24)
CALLS = 3


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.fixture(autouse=True)
def two_threads():
    """Every model here runs on 2 OpenMP threads (the process-wide setting, restored)."""
    gomp = ctypes.CDLL("libgomp.so.1")
    before = gomp.omp_get_max_threads()
    gomp.omp_set_num_threads(2)
    yield
    gomp.omp_set_num_threads(before)


def roles(g: pl.graph.Graph) -> list[TeamRole]:
    _, segments = _generate(optimize(g), None)
    return [s.role for seg in segments for s in seg.steps]


def poisoned(ex, *inputs):
    """Run with NaN-poisoned outputs: every element must be written."""
    sizes = {}
    for v, x in zip(ex.graph.inputs, inputs):
        sizes.update({d: n for d, n in zip(v.type.shape, x.shape) if isinstance(d, str)})
    outs = tuple(np.full(v.type.concrete(sizes), np.nan, v.type.dtype) for v in ex.graph.outputs)
    ex(*inputs, out=outs)
    assert all(np.isfinite(o).all() for o in outs)
    return outs


def transposed_product(name: str, n: int = 384):
    """``t = x @ w`` (a narrow product: cheap, split among the team by rows), then ``t``'s
    transpose, computed by rows: each thread reads the rows the other wrote; and ``relu(x)``,
    independent of both."""
    b = pl.graph.GraphBuilder(name)
    x = b.input("x", (n, 8))
    w = rand(8, n)
    t = b.emit(Op.MATMUL, x, b.constant(w, "w"))
    y = b.emit(Op.PERMUTE, t, axes=(1, 0))
    return b.build(b.emit(Op.MUL, y, y), b.emit(Op.RELU, x)), w


def test_kernels_share_one_region_and_equal_numpy():
    g, w = transposed_product("team_transpose")
    assert TeamRole.SHARED in roles(g)
    ex = pl.graph.build(g)
    for _ in range(CALLS):
        x = rand(*g.inputs[0].type.shape)
        y, r = poisoned(ex, x)
        np.testing.assert_allclose(y, ((x @ w).T) ** 2, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(r, np.maximum(x, 0))


def centred(name: str):
    """``x - mean(x)``: the mean is one kernel without a parallel loop (run by one thread), the
    subtraction is split among the team and reads the mean."""
    b = pl.graph.GraphBuilder(name)
    x = b.input("x", (700, 900))
    return b.build(b.emit(Op.SUB, x, b.emit(Op.MEAN, x, axes=(0, 1), keepdim=True)))


def test_one_thread_kernel_then_shared_kernel_equal_numpy():
    g = centred("team_centred")
    assert roles(g) == [TeamRole.ONE_THREAD, TeamRole.SHARED]
    ex = pl.graph.build(g)
    for _ in range(CALLS):
        x = rand(700, 900) + RNG.uniform(-5, 5)
        np.testing.assert_allclose(poisoned(ex, x)[0], x - x.mean(), rtol=1e-5, atol=1e-4)


def test_missing_waits_give_wrong_values(monkeypatch):
    """The same model built with no wait between its kernels: the thread that did not compute
    the mean subtracts the value the workspace held before (the last call's), and the test
    above would fail."""
    monkeypatch.setattr(team, "barriers", lambda reads, *_: [False] * len(reads))
    ex = pl.graph.build(centred("team_centred_without_waits"))
    wrong = 0
    for _ in range(10):
        x = rand(700, 900) + RNG.uniform(-5, 5)
        wrong += not np.allclose(poisoned(ex, x)[0], x - x.mean(), rtol=1e-5, atol=1e-4)
    assert wrong


def test_kernel_with_a_prologue_per_thread_equals_pytorch():
    """A global average pool: a serial prologue zeroes the sums (a temporary), then the loop
    over channels; each thread runs the prologue into its own sums."""
    b = pl.graph.GraphBuilder("team_squeeze")
    x = b.input("x", (1, 48, 41, 39))
    g = b.build(b.emit(Op.MUL, x, b.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=(1, 1))))
    assert roles(g) == [TeamRole.SHARED, TeamRole.SHARED]
    ex = pl.graph.build(g)
    for _ in range(CALLS):
        x = rand(1, 48, 41, 39)
        want = torch.from_numpy(x) * F.adaptive_avg_pool2d(torch.from_numpy(x), 1)
        np.testing.assert_allclose(poisoned(ex, x)[0], want.numpy(), rtol=1e-5, atol=1e-6)


class Branches(torch.nn.Module):
    """Convolutions on two branches, a tiny squeeze-excitation (kernels small enough for one
    thread), pooling and a dense layer."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(3, 16, 1)
        self.se1 = torch.nn.Linear(16, 4)
        self.se2 = torch.nn.Linear(4, 16)
        self.fc = torch.nn.Linear(16 * 20 * 15, 10)

    def forward(self, x):
        h = torch.relu(self.a(x)) + torch.sigmoid(self.b(x))
        s = torch.sigmoid(self.se2(torch.relu(self.se1(h.mean((2, 3))))))
        h = F.max_pool2d(h * s[:, :, None, None], 2)
        return torch.softmax(self.fc(torch.flatten(h, 1)), 1), h


@pytest.fixture(scope="module")
def branches():
    torch.manual_seed(5)
    model = Branches().eval()
    g = pl.graph.from_torch(model, (torch.randn(2, 3, 40, 30),), batch="n")
    return model, g


def test_branches_at_a_symbolic_batch_equal_pytorch(branches):
    model, g = branches
    ex = pl.graph.build(g)
    for batch in (1, 3, 8):
        x = rand(batch, 3, 40, 30)
        got = poisoned(ex, x)
        with torch.no_grad():
            want = model(torch.from_numpy(x))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)


def test_static_model_uses_every_role_and_equals_pytorch(branches):
    model, _ = branches
    g = pl.graph.from_torch(model, (torch.randn(1, 3, 40, 30),))
    assert {TeamRole.SHARED, TeamRole.ONE_THREAD} <= set(roles(g))
    ex = pl.graph.build(g)
    for _ in range(CALLS):
        x = rand(1, 3, 40, 30)
        got = poisoned(ex, x)
        with torch.no_grad():
            want = model(torch.from_numpy(x))
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-4, atol=1e-5)
    ex.profile(x, repeat=2)     # profiling waits after every kernel: still right
    np.testing.assert_allclose(poisoned(ex, x)[0], want[0].numpy(), rtol=1e-4, atol=1e-5)


def test_extern_call_between_two_regions():
    calls = []

    def softmax(t, *, axis):
        calls.append(t.shape)
        e = np.exp(t - t.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)

    b = pl.graph.GraphBuilder("team_extern")
    x = b.input("x", (96, 8))
    t = b.emit(Op.PERMUTE, b.emit(Op.MATMUL, x, b.constant(rand(8, 96), "w")), axes=(1, 0))
    s = b.emit(Op.SOFTMAX, t, axis=1)
    g = b.build(b.emit(Op.MATMUL, b.emit(Op.MUL, s, t), b.constant(rand(96, 5), "v")))
    pl.graph.register_extern("env.softmax", softmax)
    try:
        ex = pl.graph.build(g)
    finally:
        pl.graph.register_extern("env.softmax", None)
    assert [s.extern is not None for s in ex.segments] == [False, True, False]
    v = g.constants[-1].data
    for _ in range(CALLS):
        xv = rand(96, 8)
        tt = torch.from_numpy(xv @ g.constants[0].data).T
        want = (torch.softmax(tt, 1) * tt) @ torch.from_numpy(v)
        np.testing.assert_allclose(poisoned(ex, xv)[0], want.numpy(), rtol=1e-4, atol=1e-4)
    assert len(calls) == CALLS


def test_region_per_kernel_setting(monkeypatch):
    """POLYLOOP_GRAPH_REGIONS=kernel: every kernel alone, in its own region; same values."""
    monkeypatch.setattr(pl.config, "CONFIG",
                        dataclasses.replace(pl.config.CONFIG, region_per_kernel=True))
    g = centred("team_centred")
    _, segments = _generate(optimize(g), None)
    assert [s.role for s in segments[0].steps] == [TeamRole.ALONE, TeamRole.ALONE]
    ex = pl.graph.build(g)
    x = rand(700, 900) + RNG.uniform(-5, 5)
    np.testing.assert_allclose(poisoned(ex, x)[0], x - x.mean(), rtol=1e-5, atol=1e-4)
