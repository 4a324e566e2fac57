# SPDX-License-Identifier: Apache-2.0
"""Index arithmetic of fused loops: isl's spellings of a quotient and a remainder become one
canonical form (checked value for value), the C code divides without helpers where the
dividend is not negative, and a fused-and-vectorized loop is explicit vector code."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import polyloop as pl
from polyloop import config
from polyloop.ir.expr import BinOpKind, Var, binop
from polyloop.lower.strength import canonical_divisions
from polyloop.util.isa import host_isa

x, y = Var("x"), Var("y")
# what isl writes for the quotient and remainder of fused indices, and harder variants
SPELLINGS = [
    x - (12 * x - y + 27) // 28,
    (-(12 * x) + y + 588) % 28,
    x - (3 * x + 6) // 7,
    -((12 * x + 27 * y + 27) % 28) + 27,
    27 - (x * 5 - y) % 28,
    (44 * x + 5 * y + 61) // 28,
    (x * 16 + 600) % 28 - 3,
    binop(BinOpKind.SUB, 3 * y, (x - 5) // 4),
    (28 * x + 5) // 28 + (28 * y + 5) % 28,
    2 * x + (-(2 * x) + y) // 9 - 2 * ((3 * y - 1) % 5),
]


def evaluate(e, env):
    return eval(compile(str(e), "<index>", "eval"), {}, dict(env))   # noqa: S307 - our own IR text


@pytest.mark.parametrize("e", SPELLINGS, ids=str)
def test_canonical_form_has_the_same_value_everywhere(e):
    c = canonical_divisions(e)
    for xv, yv in itertools.product(range(-40, 41, 3), range(-30, 31, 7)):
        env = {"x": xv, "y": yv}
        assert evaluate(c, env) == evaluate(e, env), (str(e), str(c), env)


def test_isl_spellings_of_one_fused_index_look_alike():
    q = canonical_divisions(SPELLINGS[0])
    r = canonical_divisions(SPELLINGS[1])
    assert str(q) == "(16 * x + y) // 28" and str(r) == "(16 * x + y) % 28"


def fused_rows(n, width=28) -> pl.Schedule:
    A = pl.placeholder((n, width), "float32", name="A")
    B = pl.compute((n, width), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    sch = pl.Schedule(B)
    i, j = sch.get_loops("B")
    f0, f1 = sch.split(sch.fuse(i, j), [None, 16])
    sch.vectorize(f1)
    return sch


def vector_loops(source: str) -> list[str]:
    """The text of each explicit vector loop (from its comment to the end of its block)."""
    out = []
    lines = source.splitlines()
    for k, line in enumerate(lines):
        if "explicit vectors" in line:
            depth = len(line) - len(line.lstrip())
            end = next(m for m in range(k + 2, len(lines))
                       if len(lines[m]) - len(lines[m].lstrip()) <= depth
                       and lines[m].strip().startswith("}"))
            out.append("\n".join(lines[k:end + 1]))
    return out


@pytest.mark.parametrize("rows", [5, 8, 1])
def test_fused_and_vectorized_loop_is_vector_code_without_division(rows, rng):
    mod = pl.build(fused_rows(pl.var("n")))
    loops = vector_loops(mod.source)
    assert loops, mod.source
    full = loops[0]                              # the full vectors of the fused loop
    assert re.search(r"pl_load\w*_v\d+f", full)
    assert not re.search(r"pl_floordiv|pl_mod|/ 28|% 28", full)
    a = rng.random((rows, 28), dtype=np.float32)
    out = np.full((rows, 28), np.nan, np.float32)
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def conv2d_fused(shape, co) -> pl.Schedule:
    """The MLC course's conv2d schedule: padding inlined, output pixels fused and split by 16."""
    nb, ci, h, w = shape
    X = pl.placeholder(shape, "float32", name="X")
    W = pl.placeholder((co, ci, 3, 3), "float32", name="W")
    Xp = pl.compute((nb, ci, h + 2, w + 2), lambda b, c, yy, xx: pl.where(
        (yy >= 1) & (yy < h + 1) & (xx >= 1) & (xx < w + 1), X[b, c, yy - 1, xx - 1], 0.0),
        name="Xp")
    rc, ry, rx = (pl.reduce_axis((0, e), name=nm) for e, nm in ((ci, "rc"), (3, "ry"), (3, "rx")))
    Y = pl.compute((nb, co, h, w), lambda b, k, yy, xx: pl.sum(
        Xp[b, rc, yy + ry, xx + rx] * W[k, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    sch = pl.Schedule(Y)
    sch.compute_inline("Xp")
    b, k, yy, xx, c, r, s = sch.get_loops("Y")
    bk = sch.fuse(b, k)
    p0, p1 = sch.split(sch.fuse(yy, xx), [None, 16])
    sch.reorder(bk, p0, c, r, s, p1)
    sch.parallel(bk)
    sch.unroll(s)
    sch.vectorize(p1)
    sch.decompose_reduction("Y", c)
    return sch


def test_fused_conv2d_divides_without_helpers_and_matches_numpy(rng):
    shape, co = (2, 3, 7, 9), 4          # 63 pixels: the last split tile is partial
    mod = pl.build(conv2d_fused(shape, co))
    inner = mod.source.split("#pragma GCC unroll 3", 1)[1]
    assert "pl_floordiv" not in inner and "pl_mod" not in inner
    x = rng.random(shape, dtype=np.float32)
    w = rng.random((co, 3, 3, 3), dtype=np.float32)
    out = np.full((2, co, 7, 9), np.nan, np.float32)
    mod(x, w, out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("bchw,kc->bkhw", xp[:, :, r:r + 7, s:s + 9], w[:, :, r, s])
               for r in range(3) for s in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, co", [((1, 2, 5, 20), 3), ((2, 1, 4, 33), 2)])
def test_fused_conv2d_rows_wider_than_a_vector_are_masked_vector_code(shape, co, rng):
    """Rows of 20 and 33 pixels: a vector of the fused loop spans two rows at most, so the
    padding condition is two lane masks around the row break; results equal NumPy, the border
    pixels and the partial last vector included."""
    nb, _, h, w = shape
    mod = pl.build(conv2d_fused(shape, co))
    if host_isa(config.CONFIG.cc).name == "avx512":
        assert "loop 'yy_xx_fused_1': explicit vectors of 16 lanes" in mod.explain()
    x = rng.random(shape, dtype=np.float32)
    wt = rng.random((co, shape[1], 3, 3), dtype=np.float32)
    out = np.full((nb, co, h, w), np.nan, np.float32)
    mod(x, wt, out)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("bchw,kc->bkhw", xp[:, :, r:r + h, s:s + w], wt[:, :, r, s])
               for r in range(3) for s in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
