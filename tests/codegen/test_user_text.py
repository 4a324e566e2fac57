# SPDX-License-Identifier: Apache-2.0
"""What a user types that reaches generated code: annotation values and names.

An annotation value is kept as a comment, so it must not be able to end the comment early or
continue it over the next line. Names valid in Python that C headers, OpenCL or isl already
use (``INT64_MAX``, ``M_PI``, ``linux``, ``int64_t``, ``max``) or that are not ASCII (``ä``)
must build and compute what NumPy computes, on both C-family targets.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()
TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(
    not OPENCL, reason=f"OpenCL unavailable: {WHY}"))]

# macros and typedefs of the included headers, C and OpenCL keywords, isl keywords, non-ASCII
NAMES = ["int64_t", "INT64_MAX", "M_PI", "linux", "RAND_MAX", "asm", "unix", "max", "floor", "ä",
         "größe"]


def poisoned(shape) -> np.ndarray:
    return np.full(shape, np.nan, "float32")


@pytest.mark.parametrize("value", ["hello\\", "two\nlines\\", "ä\t\x00 */ /* \\"])
def test_annotation_value_cannot_comment_out_the_parallel_pragma(rng, value):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    sch = pl.Schedule(B)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, "note", value)
    sch.parallel(i)
    mod = pl.build(sch)
    lines = mod.source.splitlines()
    at = next(k for k, line in enumerate(lines) if "#pragma omp parallel" in line)
    assert lines[at - 1].lstrip().startswith("// ") and any("// note: " in x for x in lines)
    assert not any(line.rstrip().endswith("\\") for line in lines)
    assert all(line.isascii() for line in lines)
    a = rng.standard_normal(37, dtype="float32")
    out = poisoned(37)
    mod(a, out)
    np.testing.assert_array_equal(out, 2 * a)


def program_naming(role: str, name: str) -> pl.Tensor:
    """``Y[i] = 2 X[i] + sum_k X[k]`` with ``name`` as the size, the input, the output, the
    iterator or the reduction axis (each role its own test: sizes, buffers and iterators must
    differ from each other)."""
    n = pl.var(name if role == "size" else "n")
    X = pl.placeholder((n,), "float32", name=name if role == "input" else "X")
    k = pl.reduce_axis(n, name=name if role == "axis" else "k")
    S = pl.compute((1,), lambda z: pl.sum(X[k], axis=k), name="S")
    it = name if role == "iterator" else "i"
    index_map = eval(f"lambda {it}: X[{it}] * 2.0 + S[0]", {"X": X, "S": S})  # noqa: S307
    return pl.compute((n,), index_map, name=name if role == "output" else "Y")


ROLES = ["input", "output", "iterator", "axis"]
# each name as the size and in one more role on C; the ones OpenCL predefines on OpenCL too
CASES = ([("c", "size", name) for name in NAMES]
         + [("c", ROLES[k % len(ROLES)], name) for k, name in enumerate(NAMES[:6])]
         + [pytest.param("opencl", role, name, marks=pytest.mark.skipif(
             not OPENCL, reason=f"OpenCL unavailable: {WHY}"))
            for role, name in [("size", "M_PI"), ("iterator", "max"), ("output", "ä")]])


@pytest.mark.parametrize(("target", "role", "name"), CASES)
def test_names_the_target_predefines_build_and_match_numpy(rng, target, role, name):
    mod = pl.build(program_naming(role, name), target=target)
    for size in (1, 13):
        x = rng.standard_normal(size, dtype="float32")
        out = poisoned(size)
        mod(x, out)
        np.testing.assert_allclose(out, 2 * x + x.sum(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["M_PI"])
def test_kernel_and_buffer_names_from_make_kernel_build(rng, target, name):
    spelled = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i] + 1",
                             name="k_" + name.replace("ä", "ae"))
    declared = pl.make_kernel("{ [i] : 0 <= i < n }", f"{name if name.isascii() else 'b'}[i] = "
                              "2*a[i] + 1")
    for knl in (spelled, declared):
        mod = pl.build(knl, target=target)
        a = rng.standard_normal(9, dtype="float32")
        np.testing.assert_allclose(mod(a), 2 * a + 1, rtol=1e-6)


def test_a_program_named_like_a_macro_gets_a_usable_entry_point(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    mod = pl.build(B, name="M_PI")
    assert "int32_t M_PI(" not in mod.source
    a = rng.standard_normal(5, dtype="float32")
    np.testing.assert_array_equal(mod(a), a + 1)


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_non_ascii_names_in_a_script_build(target):
    if target == "opencl":
        pytest.importorskip("pyopencl", reason="the OpenCL target needs PyOpenCL")
    prog = pl.script('''
def scale(Ä: pl.Buffer[("größe",), "float32"], B: pl.Buffer[("größe",), "float32"]):
    for ä in range(größe):
        B[ä] = Ä[ä] * 2.0 + 1.0
''')
    mod = pl.build(prog, target=target)
    a = np.random.default_rng(5).standard_normal(37).astype("float32")
    out = np.full(37, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)
