# SPDX-License-Identifier: Apache-2.0
"""Programs the schedule tests share, their NumPy references, and small assertion helpers.

Outputs are always passed in pre-filled with NaN, so an element a schedule forgets to compute
shows up as a mismatch instead of as a stale value that happens to be right.
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var, VarKind
from polyloop.ir.program import Buffer, BufferRole, Program, Statement


def poisoned(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    """An output array filled with a value no kernel should leave behind."""
    fill = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype=dtype)


def lines(sch: pl.Schedule) -> list[str]:
    """The printed schedule as stripped lines (indentation checked separately where it matters)."""
    return [ln.strip() for ln in str(sch).splitlines() if ln.strip()]


def indent_of(sch: pl.Schedule, fragment: str) -> int:
    """Indentation (in spaces) of the first printed line containing ``fragment``."""
    for ln in str(sch).splitlines():
        if fragment in ln:
            return len(ln) - len(ln.lstrip())
    raise AssertionError(f"{fragment!r} not in\n{sch}")


def raises_schedule_error(fn: Callable[[], object], *fragments: str) -> str:
    """Call ``fn``; it must raise ScheduleError whose message contains every fragment (a regex
    fragment when it starts with ``re:``). Returns the message."""
    with pytest.raises(pl.ScheduleError) as info:
        fn()
    msg = str(info.value)
    for f in fragments:
        if f.startswith("re:"):
            assert re.search(f[3:], msg), f"/{f[3:]}/ not in: {msg}"
        else:
            assert f in msg, f"{f!r} not in: {msg}"
    return msg


def refused_unchanged(sch: pl.Schedule, fn: Callable[[], object], *fragments: str) -> str:
    """Like ``raises_schedule_error``, and the schedule must be exactly as before the call."""
    text, steps = str(sch), len(sch.trace)
    msg = raises_schedule_error(fn, *fragments)
    assert str(sch) == text, "a refused primitive changed the schedule"
    assert len(sch.trace) == steps, "a refused primitive was recorded in the trace"
    return msg


# matmul (+ ReLU) ----------------------------------------------------------------------------

def matmul_relu(dtype: str = "float32"):
    """C = A @ B (a sum reduction), D = max(C, 0), with a symbolic size n."""
    n = pl.var("n")
    A = pl.placeholder((n, n), dtype, name="A")
    B = pl.placeholder((n, n), dtype, name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    return D


def check_matmul_relu(sch: pl.Schedule, rng: np.random.Generator, sizes=(1, 13, 37)) -> None:
    """Build the schedule once and compare with NumPy at every size (one binary: n is symbolic)."""
    mod = pl.build(sch)
    for size in sizes:
        a, b = rng.standard_normal((2, size, size), dtype="float32")
        d = poisoned((size, size))
        mod(a, b, d)
        expected = np.maximum(a.astype("float64") @ b.astype("float64"), 0.0)
        np.testing.assert_allclose(d, expected, rtol=1e-4, atol=1e-4 * np.sqrt(size))


def matmul_sch() -> tuple[pl.Schedule, list[pl.LoopHandle]]:
    sch = pl.Schedule(matmul_relu())
    return sch, sch.get_loops(sch.get_block("C"))


# vector add (seed 003) ----------------------------------------------------------------------

def vector_add():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    return pl.compute((n,), lambda i: A[i] + B[i], name="C")


# in-place stencil (seed 002) ----------------------------------------------------------------

def stencil() -> Program:
    """``A[i, j] = A[i-1, j] + A[i, j-1]`` for 1 <= i, j < n, updated in place."""
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n, n), DType.FLOAT64, BufferRole.INOUT)
    i, j = Var("i"), Var("j")
    S = Statement("S", ("i", "j"), "[n] -> { S[i, j] : 1 <= i < n and 1 <= j < n }", "A",
                  (i, j), A[i - 1, j] + A[i, j - 1])
    return Program("stencil", (A,), (S,), ("n",), ("A",))


def stencil_reference(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    for i in range(1, a.shape[0]):
        for j in range(1, a.shape[1]):
            out[i, j] = out[i - 1, j] + out[i, j - 1]
    return out


def check_stencil(sch: pl.Schedule, rng: np.random.Generator, sizes=(2, 9, 23)) -> None:
    mod = pl.build(sch)
    for size in sizes:
        # small values: the sums grow like binomial coefficients
        a = rng.uniform(-1, 1, (size, size))
        expected = stencil_reference(a)
        mod(a)
        np.testing.assert_allclose(a, expected, rtol=1e-12, atol=1e-12)


# convolution with a padding stage (seed 001) -------------------------------------------------

def conv2d(batch: int, cin: int, cout: int, h: int, w: int, k: int = 3):
    """P = zero-padded input (pad 1), O = sum over (rc, rh, rw) of P * W: a 'same' convolution."""
    A = pl.placeholder((batch, cin, h, w), "float32", name="A")
    Wt = pl.placeholder((cout, cin, k, k), "float32", name="W")
    pad = (k - 1) // 2
    P = pl.compute((batch, cin, h + 2 * pad, w + 2 * pad), lambda b, c, y, x: pl.where(
        (y >= pad) & (y < h + pad) & (x >= pad) & (x < w + pad), A[b, c, y - pad, x - pad], 0.0),
        name="P")
    rc = pl.reduce_axis((0, cin), name="rc")
    rh = pl.reduce_axis((0, k), name="rh")
    rw = pl.reduce_axis((0, k), name="rw")
    return pl.compute((batch, cout, h, w), lambda b, o, y, x: pl.sum(
        P[b, rc, y + rh, x + rw] * Wt[o, rc, rh, rw], axis=[rc, rh, rw]), name="O")


def conv2d_reference(a: np.ndarray, wt: np.ndarray) -> np.ndarray:
    _, _, h, w = a.shape
    k = wt.shape[2]
    pad = (k - 1) // 2
    p = np.pad(a.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((a.shape[0], wt.shape[0], h, w))
    for dy in range(k):
        for dx in range(k):
            out += np.einsum("bchw,oc->bohw", p[:, :, dy:dy + h, dx:dx + w], wt[:, :, dy, dx])
    return out


def check_conv(sch: pl.Schedule, rng: np.random.Generator, shape: tuple[int, ...]) -> None:
    batch, cin, cout, h, w = shape
    a = rng.standard_normal((batch, cin, h, w), dtype="float32")
    wt = rng.standard_normal((cout, cin, 3, 3), dtype="float32")
    out = poisoned((batch, cout, h, w))
    pl.build(sch)(a, wt, out)
    np.testing.assert_allclose(out, conv2d_reference(a, wt), rtol=1e-4, atol=1e-4)


def diagonal_stencil() -> Program:
    """``A[i, j] = 0.5 * A[i-1, j+1] + A[i, j]``: distance (1, -1), so interchanging or tiling
    (i, j) is illegal until j is skewed by i."""
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n, n), DType.FLOAT64, BufferRole.INOUT)
    i, j = Var("i"), Var("j")
    S = Statement("S", ("i", "j"), "[n] -> { S[i, j] : 1 <= i < n and 0 <= j < n - 1 }", "A",
                  (i, j), A[i - 1, j + 1] * 0.5 + A[i, j])
    return Program("diagonal", (A,), (S,), ("n",), ("A",))


def diagonal_reference(a: np.ndarray) -> np.ndarray:
    out = a.copy()
    for i in range(1, a.shape[0]):
        for j in range(0, a.shape[1] - 1):
            out[i, j] = out[i - 1, j + 1] * 0.5 + out[i, j]
    return out


def check_diagonal(sch: pl.Schedule, rng: np.random.Generator, sizes=(2, 11, 30)) -> None:
    mod = pl.build(sch)
    for size in sizes:
        a = rng.standard_normal((size, size))
        expected = diagonal_reference(a)
        mod(a)
        np.testing.assert_allclose(a, expected, rtol=1e-12, atol=1e-12)


def reversed_copy() -> Program:
    """P[i] = 2 A[i] (a temporary), then A[i] = P[n-1-i] in place. Computing P inside the second
    loop would read A[k] after it was overwritten (a WAR dependence) for half of the k."""
    n = Var("n", VarKind.PARAM)
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INOUT)
    P = Buffer("P", (n,), DType.FLOAT64, BufferRole.TEMP)
    i = Var("i")
    s1 = Statement("P", ("i",), "[n] -> { P[i] : 0 <= i < n }", "P", (i,), A[i] * 2.0)
    s2 = Statement("R", ("i",), "[n] -> { R[i] : 0 <= i < n }", "A", (i,), P[n - 1 - i])
    return Program("reversed_copy", (A, P), (s1, s2), ("n",), ("A",))
