# SPDX-License-Identifier: Apache-2.0
"""``pl.extern``: C functions the user provides, called from computes and scripts; the built
kernel and the reference interpreter (through ``python=``) agree with NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

CLAMP = "static double clamp01(double x) { return x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x; }"
clamp01 = pl.extern("clamp01", dtype="float64", args=["float64"], source=CLAMP,
                    python=lambda x: min(max(x, 0.0), 1.0))


def test_extern_with_source_in_a_compute(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    B = pl.compute((n,), lambda i: clamp01(A[i] * 2.0) + 1.0, name="B")
    a = rng.standard_normal(13)
    got = np.full(13, np.nan)
    pl.build(B, check=True)(a, got)       # check=True: also the interpreter, through python=
    np.testing.assert_array_equal(got, np.clip(a * 2.0, 0.0, 1.0) + 1.0)


def test_extern_from_a_header_in_a_script(tmp_path, rng):
    header = tmp_path / "softclip.h"
    header.write_text("static inline float softclip(float x) "
                      "{ return x / (1.0f + (x < 0 ? -x : x)); }\n")
    softclip = pl.extern("softclip", dtype="float32", args=["float32"], header=str(header))

    def f(n: int, A: pl.Buffer[("n",), "float32"], B: pl.Buffer[("n",), "float32"]):
        for i in range(n):
            B[i] = softclip(A[i])
    prog = pl.script(f)
    a = rng.standard_normal(9).astype("float32")
    got = pl.build(prog)(a)
    np.testing.assert_allclose(got, a / (1 + np.abs(a)), rtol=1e-6)


def test_interpreter_without_python_says_what_to_add():
    f = pl.extern("f", dtype="float64", args=["float64"], source="static double f(double x) "
                  "{ return x; }")
    A = pl.placeholder((4,), "float64", name="A")
    B = pl.compute((4,), lambda i: f(A[i]), name="B")
    with pytest.raises(pl.PolyloopError, match="python="):
        pl.build(B, check=True)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "bad name", "header": "x.h"}, "not a C identifier"),
    ({"name": "f", "header": 'x.h"\n#define'}, "not a file name"),
    ({"name": "f"}, "needs header= .* or source="),
])
def test_declaration_errors(kwargs, message):
    name = kwargs.pop("name")
    with pytest.raises(pl.PolyloopError, match=message):
        pl.extern(name, dtype="float32", args=["float32"], **kwargs)


def test_wrong_argument_count():
    with pytest.raises(pl.PolyloopError, match="takes 1 arguments"):
        clamp01(1.0, 2.0)


# C's math library in a vectorized loop: the call is the operator it computes, so the loop is
# explicit vector code (the operator's vector form); a call outside one, or of another
# header's function, stays the call the user wrote.
MATH = [("expf", "float32", np.exp, lambda rng, k: rng.uniform(-80, 80, k)),
        ("logf", "float32", np.log, lambda rng, k: rng.uniform(1e-3, 1e3, k)),
        ("sqrt", "float64", np.sqrt, lambda rng, k: rng.uniform(0, 1e4, k)),
        ("tanhf", "float32", np.tanh, lambda rng, k: rng.uniform(-9, 9, k))]


@pytest.mark.parametrize("name, dtype, ref, values", MATH, ids=[m[0] for m in MATH])
def test_math_library_call_in_a_vectorized_loop_is_vector_code(rng, name, dtype, ref, values):
    fn = pl.extern(name, dtype=dtype, args=[dtype], header="<math.h>")
    n = pl.var("n")
    A = pl.placeholder((n,), dtype, name="A")
    s = pl.Schedule(pl.compute((n,), lambda i: fn(A[i]), name="B"))
    outer, inner = s.split(s.get_loops("B")[0], factor=16)
    s.vectorize(inner)
    mod = pl.build(s)
    assert "Extern has no vector form" not in mod.source
    tol = 1e-6 if dtype == "float32" else 1e-14
    for size in (77, 1):        # whole vectors and a masked remainder; a remainder alone
        a = values(rng, size).astype(dtype)
        got = np.full(size, np.nan, dtype)
        mod(a, got)
        np.testing.assert_allclose(got, ref(a.astype("float64")), rtol=tol, atol=tol)


def test_other_calls_stay_the_calls_written(rng):
    expf = pl.extern("expf", dtype="float32", args=["float32"], header="<math.h>")
    mine = pl.extern("expf_approx", dtype="float32", args=["float32"],
                     source="static float expf_approx(float x) { return 1.0f + x; }")
    A = pl.placeholder((9,), "float32", name="A")
    scalar = pl.build(pl.compute((9,), lambda i: expf(A[i]), name="B"))
    assert "expf(A[i])" in scalar.source       # not vectorized: the call as written
    s = pl.Schedule(pl.compute((9,), lambda i: mine(A[i]), name="B"))
    s.vectorize(s.get_loops("B")[0])
    own = pl.build(s)
    assert "expf_approx(A[i])" in own.source   # not the math library's: not an operator
    a = rng.standard_normal(9).astype("float32")
    np.testing.assert_allclose(scalar(a), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(own(a), 1.0 + a, rtol=1e-6)
