# SPDX-License-Identifier: Apache-2.0
"""``pl.auto_schedule``: seed 002's examples get the structure the seed describes (a wavefront
with a parallel inner loop; the two fusion strategies of the convolution), written as ordinary
primitives, and every automatic schedule computes what the program as written computes."""
from __future__ import annotations

import math

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.loops import LoopKind
from polyloop.poly.tree import LoopNode, statements_under
from polyloop.testing import interpret
from seed_scripts import mm_relu, stencil  # tests/ is on sys.path (rootdir conftest)


@pl.script
def conv(X: pl.Buffer[("H", "W"), "float32"], B: pl.Buffer[("K", "K"), "float32"],
         Q: pl.Buffer[("H", "W"), "float32"], C: pl.Buffer[("H", "W"), "float32"]):
    """Seed 002's convolution: S0 quantizes, S1 initializes, S2 reduces, S3 is a ReLU."""
    assert K >= 1 and H >= K and W >= K  # noqa: F821
    for h in range(H):  # noqa: F821
        for w in range(W):  # noqa: F821
            Q[h, w] = math.floor(X[h, w] * 8.0) / 8.0                       # S0
    for h in range(H - K + 1):  # noqa: F821
        for w in range(W - K + 1):  # noqa: F821
            C[h, w] = 0.0                                                   # S1
            for kh in range(K):  # noqa: F821
                for kw in range(K):  # noqa: F821
                    C[h, w] += Q[h + kh, w + kw] * B[kh, kw]                # S2
            C[h, w] = max(C[h, w], 0.0)                                     # S3


def conv_numpy(x, b):
    q = np.floor(x * np.float32(8.0)) / np.float32(8.0)
    k = b.shape[0]
    oh, ow = x.shape[0] - k + 1, x.shape[1] - k + 1
    c = np.zeros((oh, ow), np.float32)
    for kh in range(k):
        for kw in range(k):
            c += q[kh:kh + oh, kw:kw + ow] * b[kh, kw]
    return q, np.maximum(c, 0)


def nests(sch):
    """Statements of each top-level loop nest, in order."""
    return [sorted(statements_under(c)) for c in sch.state.root.children]


def loop_kinds(node):
    out = []
    while isinstance(node, LoopNode):
        out.append(node.kind)
        node = node.children[0] if node.children else None
    return out


# -- the stencil: a wavefront with a parallel inner loop ------------------------------------------

@pytest.mark.parametrize("tile", [None, 4, 32])
def test_stencil_gets_a_wavefront_with_a_parallel_inner_loop(tile):
    sch = pl.auto_schedule(stencil, tile=tile)
    steps = [s.primitive for s in sch.trace]
    assert "skew" in steps and "parallel" in steps
    top = sch.state.root.children[0]
    kinds = loop_kinds(top)
    assert kinds[0] is LoopKind.SERIAL and kinds[1] is LoopKind.PARALLEL
    # the outer loop is a wavefront: its value mixes both iterators
    for _, expr in top.exprs:
        assert "i" in expr.text and "j" in expr.text


def test_stencil_untiled_trace_reads_as_primitives():
    sch = pl.auto_schedule(stencil, tile=None)
    assert str(sch.trace) == ("sch.skew(l0, l1, factor=1)\nsch.reorder(l1, l0)\n"
                              "sch.parallel(l0)")
    assert "parallel(" in str(sch)


@pytest.mark.parametrize("n", [1, 2, 7, 37])
@pytest.mark.parametrize("tile", [None, 4, 32])
def test_stencil_computes_the_same(n, tile, rng):
    a = rng.standard_normal((n, n))
    expected = a.copy()
    interpret(stencil, expected)
    got = a.copy()
    pl.build(pl.auto_schedule(stencil, tile=tile))(got)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_the_trace_replays_and_the_user_can_keep_going():
    sch = pl.auto_schedule(stencil, tile=8)
    again = pl.Schedule.from_trace(stencil, sch.trace)
    assert str(again) == str(sch)
    top = sch.state.root.children[0]
    with pytest.raises(pl.ScheduleError, match="cannot parallelize"):
        sch.parallel(pl.LoopHandle(top.id, top.name))       # the wavefront loop carries deps
    inner = top.children[0].children[0].children[0]
    sch.unroll(pl.LoopHandle(inner.id, inner.name), 2)    # a legal edit is accepted
    a = np.random.default_rng(3).standard_normal((19, 19))
    expected = a.copy()
    interpret(stencil, expected)
    pl.build(sch)(a)
    np.testing.assert_allclose(a, expected, rtol=1e-12)


# -- seed 002's convolution: the two fusion strategies --------------------------------------------

def test_conv_fusion_min_keeps_S0_apart_from_S1_S2_S3():
    sch = pl.auto_schedule(conv, fusion="min")
    assert nests(sch) == [["Q"], ["C", "C_1", "C_2"]]
    assert "merge" not in [s.primitive for s in sch.trace]
    # both nests keep their outer loops parallel
    assert all(c.kind is LoopKind.PARALLEL for c in sch.state.root.children)


def test_conv_fusion_max_fuses_everything_with_shifts():
    sch = pl.auto_schedule(conv, fusion="max")
    assert nests(sch) == [["C", "C_1", "C_2", "Q"]]
    shifts = [s for s in sch.trace if s.primitive == "shift"]
    assert [s.args[1] for s in shifts] == ["K - 1", "K - 1"]
    assert sum(s.primitive == "merge" for s in sch.trace) == 2
    assert "shift(" in str(sch.trace) and "merge(" in str(sch.trace)


def test_conv_fusion_smart_prefers_parallelism():
    assert nests(pl.auto_schedule(conv, fusion="smart")) == [["Q"], ["C", "C_1", "C_2"]]


@pytest.mark.parametrize("fusion", ["min", "smart", "max"])
@pytest.mark.parametrize("h, w, k", [(23, 19, 3), (9, 11, 1), (13, 7, 5)])
def test_conv_strategies_compute_the_same(fusion, h, w, k, rng):
    x = rng.standard_normal((h, w)).astype("float32")
    b = rng.standard_normal((k, k)).astype("float32")
    q_ref, c_ref = conv_numpy(x, b)
    q, c = pl.build(pl.auto_schedule(conv, fusion=fusion, tile=4))(x, b)
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_allclose(c[:h - k + 1, :w - k + 1], c_ref, rtol=1e-5, atol=1e-5)


# -- seed 001 programs and tensor expressions ----------------------------------------------------------

@pytest.mark.parametrize("fusion", ["min", "smart", "max"])
@pytest.mark.parametrize("n, l, m", [(1, 1, 1), (37, 29, 41)])
def test_mm_relu(fusion, n, l, m, rng):
    a = rng.standard_normal((n, l)).astype("float32")
    b = rng.standard_normal((l, m)).astype("float32")
    sch = pl.auto_schedule(mm_relu, fusion=fusion, tile=8)
    np.testing.assert_allclose(pl.build(sch)(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    if fusion == "max":     # C[i, j] only needs Y[i, j]: fused without a shift
        assert len(sch.state.root.children) == 1
    if fusion == "smart":   # the product is a band of its own, tiled (reuse of A and B)
        assert len(sch.state.root.children) == 2
        assert "split" in [s.primitive for s in sch.trace]


@pl.script
def convol(A: pl.Buffer[(1, 1, 8, 8), "float64"], B: pl.Buffer[(2, 1, 3, 3), "float64"],
           C: pl.Buffer[(1, 2, 6, 6), "float64"]):
    for i in range(1):
        for j in range(2):
            for k in range(6):
                for l in range(6):
                    for m in range(3):
                        for n in range(3):
                            C[i, j, k, l] += A[i, i, k + m, l + n] * B[j, i, m, n]


def test_seed_six_deep_convolution(rng):
    a, b = rng.standard_normal((1, 1, 8, 8)), rng.standard_normal((2, 1, 3, 3))
    c0 = rng.standard_normal((1, 2, 6, 6))
    expected = c0.copy()
    interpret(convol, a, b, expected)
    got = c0.copy()
    pl.build(pl.auto_schedule(convol, tile=4))(a, b, got)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_tensor_expressions_are_scheduled_too(rng):
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    sch = pl.auto_schedule(pl.to_program(D), fusion="max", tile=16)
    assert len(sch.state.root.children) == 1
    a = rng.standard_normal((45, 45)).astype("float32")
    b = rng.standard_normal((45, 45)).astype("float32")
    np.testing.assert_allclose(pl.build(sch)(a, b), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fusion", ["min", "max"])
def test_time_loops(fusion, rng):
    jacobi = pl.script("""
def jacobi(A: pl.Buffer[("T", "n"), "float64"], B: pl.Buffer[("n",), "float64"]):
    for t in range(T):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[0, i - 1] + A[0, i] + A[0, i + 1])
        for i in range(1, n - 1):
            A[0, i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
""")
    a = rng.standard_normal((5, 17))
    b = rng.standard_normal(17)
    ea, eb = a.copy(), b.copy()
    interpret(jacobi, ea, eb)
    pl.build(pl.auto_schedule(jacobi, fusion=fusion, tile=4))(a, b)
    np.testing.assert_allclose(a, ea, rtol=1e-12)
    np.testing.assert_allclose(b, eb, rtol=1e-12)


def test_seidel_is_skewed_and_correct(rng):
    seidel = pl.script("""
def seidel(A: pl.Buffer[("n", "n"), "float64"], S: pl.Buffer[("T",), "float64"]):
    for t in range(T):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1]
                           + A[i, j] + A[i, j + 1] + A[i + 1, j - 1] + A[i + 1, j]
                           + A[i + 1, j + 1]) / 9.0
""")
    sch = pl.auto_schedule(seidel, tile=4)
    assert "skew" in [s.primitive for s in sch.trace]
    a = rng.standard_normal((13, 13))
    expected = a.copy()
    interpret(seidel, expected, np.zeros(4))
    pl.build(sch)(a, np.zeros(4))
    np.testing.assert_allclose(a, expected, rtol=1e-12)


# -- inspection and errors --------------------------------------------------------------------------

def test_dependences_print_as_in_seed_002():
    text = str(pl.dependences(stencil))
    assert "{ A[i, j] -> A[i, 1 + j] : " in text
    assert "{ A[i, j] -> A[1 + i, j] : " in text


def test_affine_view_of_an_automatic_schedule():
    text = pl.auto_schedule(stencil, tile=None).show(affine=True)
    assert "# affine schedules" in text
    assert "A[i, j] -> [i + j, i]" in text


@pytest.mark.parametrize("kwargs, message", [
    ({"fusion": "most"}, "fusion must be one of"),
    ({"target": "fpga"}, "unknown target"),
    ({"tile": 1}, "tile is \"auto\", a size"),
    ({"tile": "big"}, "tile is \"auto\", a size"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(pl.PolyloopError, match=message):
        pl.auto_schedule(stencil, **kwargs)


@pl.script
def conv_fixed(X: pl.Buffer[(34, 34), "float32"], B: pl.Buffer[(3, 3), "float32"],
               Q: pl.Buffer[(34, 34), "float32"], C: pl.Buffer[(32, 32), "float32"]):
    """Seed 002's convolution with constant sizes: the shifts are constants (the seed's 99/148)."""
    for h in range(34):
        for w in range(34):
            Q[h, w] = math.floor(X[h, w] * 8.0) / 8.0
    for h in range(32):
        for w in range(32):
            C[h, w] = 0.0
            for kh in range(3):
                for kw in range(3):
                    C[h, w] += Q[h + kh, w + kw] * B[kh, kw]
            C[h, w] = max(C[h, w], 0.0)


@pytest.mark.parametrize("fusion, groups", [("min", [["Q"], ["C", "C_1", "C_2"]]),
                                            ("max", [["C", "C_1", "C_2", "Q"]])])
def test_conv_with_constant_sizes(fusion, groups, rng):
    sch = pl.auto_schedule(conv_fixed, fusion=fusion)
    assert nests(sch) == groups
    if fusion == "max":
        assert [s.args[1] for s in sch.trace if s.primitive == "shift"] == [2, 2]
    x = rng.standard_normal((34, 34)).astype("float32")
    b = rng.standard_normal((3, 3)).astype("float32")
    q_ref, c_ref = conv_numpy(x, b)
    q, c = pl.build(sch)(x, b)
    np.testing.assert_array_equal(q, q_ref)
    np.testing.assert_allclose(c, c_ref, rtol=1e-5, atol=1e-5)
