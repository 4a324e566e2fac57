# SPDX-License-Identifier: Apache-2.0
"""Indices isl cannot prove in bounds (read from data, or not affine) are checked when the
kernel runs: an index outside its buffer is skipped, never read or written, and the call raises
IndexOutOfBounds naming the buffer, the index and the statement. Affine indices get no check."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()


def scatter():
    return pl.make_kernel("{ [i] : 0 <= i < n }", "out[idx[i]] = a[i]  {id=scatter}",
                          args=[pl.ArrayArg("out", "float32", shape=("m",)),
                                pl.ArrayArg("idx", "int32", shape=("n",)),
                                pl.ArrayArg("a", "float32", shape=("n",))])


def gather(parallel: bool = False):
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[idx[i]]  {id=gather}",
                         args=[pl.ArrayArg("out", "float32", shape=("n",)),
                               pl.ArrayArg("idx", "int64", shape=("n",)),
                               pl.ArrayArg("a", "float32", shape=("m",))])
    return pl.tag_inames(knl, {"i": "g.0"}) if parallel else knl


@pl.script
def squares(A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
    for i in range(n):  # noqa: F821 - n is the size parameter of A's shape
        B[i] = A[i * i]


@pytest.fixture(scope="module")
def scatter_c():
    return pl.build(scatter())


def test_scatter_with_valid_indices_matches_numpy(scatter_c, rng):
    for n, m in ((1, 1), (7, 13), (100, 100)):
        idx = rng.permutation(m)[:n].astype("int32")
        a = rng.standard_normal(n, dtype="float32")
        out = np.full(m, np.nan, "float32")
        scatter_c(out=out, idx=idx, a=a)
        expected = np.full(m, np.nan, "float32")
        expected[idx] = a
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("bad", [7, -1, 2**31 - 1])
def test_scatter_past_the_end_writes_nothing_outside_and_raises(scatter_c, rng, bad):
    big = np.full(7 + 16, -5.0, "float32")      # out is big[4:11]; its neighbours stay -5
    out = big[4:11]
    idx = np.array([0, 3, bad, 6], "int32")
    with pytest.raises(pl.IndexOutOfBounds, match=rf"statement 'scatter' writes out\[idx\[i\]\] "
                                                  rf"with index {bad} in dimension 0, outside "
                                                  rf"0..6") as info:
        scatter_c(out=out, idx=idx, a=np.arange(4, dtype="float32"))
    assert isinstance(info.value, IndexError) and isinstance(info.value, pl.ArgumentError)
    np.testing.assert_array_equal(big[:4], -5.0)
    np.testing.assert_array_equal(big[11:], -5.0)
    assert out[0] == 0 and out[3] == 1 and out[6] == 3   # the valid accesses ran


def test_gather_in_a_parallel_loop_reports_one_of_the_bad_indices(rng):
    mod = pl.build(gather(), target="c")
    n, m = 1000, 37
    idx = rng.integers(0, m, n)
    a = rng.standard_normal(m, dtype="float32")
    np.testing.assert_array_equal(mod(idx=idx, a=a), a[idx])
    idx[[5, 900]] = [m, -3]
    with pytest.raises(pl.IndexOutOfBounds, match=r"reads a\[idx\[i\]\] with index (37|-3) "):
        mod(idx=idx, a=a)


def test_non_affine_index_is_checked_and_never_reads_past_the_end():
    mod = pl.build(squares)
    assert "pl_index_ok" in mod.source
    a = np.arange(2, dtype="float32")
    np.testing.assert_array_equal(mod(a), [0, 1])
    with pytest.raises(pl.IndexOutOfBounds, match=r"'B' reads A\[i \* i\] with index 9 in "
                                                  r"dimension 0, outside 0..4"):
        mod(np.arange(5, dtype="float32"))
    with pytest.raises(pl.IndexOutOfBounds, match=r"A\[i \* i\] with index 200704 "):
        mod(np.zeros(200_000, "float32"))   # would be far past the end: no crash


def test_affine_indices_get_no_check():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[n - 1 - i] * 2.0, name="B")
    assert "pl_index_ok" not in pl.build(B).source


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {WHY}")
def test_opencl_gather_checks_indices(rng):
    mod = pl.build(gather(parallel=True), target="opencl")
    n, m = 100, 9
    idx = rng.integers(0, m, n)
    a = rng.standard_normal(m, dtype="float32")
    out = np.full(n, np.nan, "float32")
    mod(out=out, idx=idx, a=a)
    np.testing.assert_array_equal(out, a[idx])
    idx[42] = 10**12
    with pytest.raises(pl.IndexOutOfBounds, match=r"'gather' reads a\[idx\[i\]\] with index "
                                                  r"1000000000000 in dimension 0, outside 0..8"):
        mod(idx=idx, a=a)


def test_an_index_too_large_to_check_is_refused_with_the_way_out(rng):
    """A checked index of hundreds of nodes would be tested at every access (and keep the C
    compiler busy): the build is refused, naming the statement and the buffer; reading the
    index from a stage of its own, as the message says, builds and runs."""
    terms = 70
    idx = pl.placeholder((16 + terms,), "int64", name="I")
    a = pl.placeholder((4 * terms,), "float32", name="A")

    def index(i):
        e = idx[i]
        for k in range(1, terms):
            e = e + idx[i + k]
        return e
    with pytest.raises(pl.BuildError, match=r"statement 'B' reads A at an index .* at most "
                                            r"256\. Compute such an index in a stage"):
        pl.build(pl.compute((16,), lambda i: a[index(i)], name="B"))
    J = pl.compute((16,), index, name="J")
    mod = pl.build(pl.compute((16,), lambda i: a[J[i]], name="B"))
    ix = rng.integers(0, 4, 16 + terms)
    av = rng.standard_normal(4 * terms, dtype="float32")
    want = av[np.array([ix[i:i + terms].sum() for i in range(16)])]
    out = np.full(16, np.nan, np.float32)
    mod(ix, av, out)
    np.testing.assert_array_equal(out, want)
