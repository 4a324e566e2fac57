# SPDX-License-Identifier: Apache-2.0
"""``pl.build`` end to end: tensor expressions -> C -> a module called on NumPy arrays.

Every result is compared with NumPy on fresh random data at awkward sizes; outputs passed in
are pre-filled with a poison value so that an element the kernel forgets to write shows up.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.compiler import STATS


def poisoned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An output array whose every element is a value no kernel should leave behind."""
    fill = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype=dtype)


def matmul(n: pl.Var, dtype: str = "float32", relu: bool = False):
    A = pl.placeholder((n, n), dtype, name="A")
    B = pl.placeholder((n, n), dtype, name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    if not relu:
        return A, B, C
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    return A, B, D


# elementwise ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 13, 1001])
def test_vector_add_matches_numpy_and_writes_every_element(rng, size):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    C = pl.compute((n,), lambda i: A[i] + B[i], name="C")
    mod = pl.build(C)
    a, b = rng.standard_normal((2, size), dtype="float32")
    c = poisoned((size,), "float32")
    assert mod(a, b, c) is None
    np.testing.assert_array_equal(c, a + b)
    np.testing.assert_array_equal(mod(a, b), a + b)


def test_broadcast_add_int64_matches_numpy(rng):
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "int64", name="A")
    B = pl.placeholder((m,), "int64", name="B")
    C = pl.compute((n, m), lambda i, j: A[i, j] + B[j], name="C")
    mod = pl.build(C)
    a = rng.integers(-2**40, 2**40, size=(5, 11), dtype="int64")
    b = rng.integers(-2**40, 2**40, size=11, dtype="int64")
    c = poisoned((5, 11), "int64")
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + b[None, :])
    out = mod(a, b)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, a + b[None, :])


# matmul -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 7, 64, 129])
@pytest.mark.parametrize("relu", [False, True], ids=["matmul", "matmul_relu"])
def test_matmul_with_symbolic_size_matches_numpy(rng, size, relu):
    A, B, out = matmul(pl.var("n"), relu=relu)
    mod = pl.build(out)
    a, b = rng.standard_normal((2, size, size), dtype="float32")
    expected = a.astype("float64") @ b.astype("float64")
    if relu:
        expected = np.maximum(expected, 0.0)
    d = poisoned((size, size), "float32")
    mod(a, b, d)
    np.testing.assert_allclose(d, expected, rtol=1e-4, atol=1e-4 * np.sqrt(size))
    if relu:
        assert (d >= 0).all()


def test_one_module_serves_every_size(rng):
    """The size parameter is bound from the shapes at each call, not at build time."""
    _, _, C = matmul(pl.var("n"), dtype="float64")
    mod = pl.build(C)
    for size in (3, 1, 10, 0):
        a, b = rng.standard_normal((2, size, size))
        np.testing.assert_allclose(mod(a, b), a @ b, rtol=1e-12, atol=1e-12)


def test_temporaries_are_not_arguments():
    A, B, D = matmul(pl.var("n"), relu=True)
    mod = pl.build(D)
    assert [b.name for b in mod.args] == ["A", "B", "D"]
    assert "C" not in mod.signature


# arguments ----------------------------------------------------------------------------------------

def test_args_fix_the_argument_order(rng):
    A, B, D = matmul(pl.var("n"), dtype="float64", relu=True)
    mod = pl.build(D, args=[B, A, D])
    assert [b.name for b in mod.args] == ["B", "A", "D"]
    a, b = rng.standard_normal((2, 9, 9))
    d = poisoned((9, 9), "float64")
    mod(b, a, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0.0), rtol=1e-12, atol=1e-12)


def test_default_order_is_placeholders_by_creation_then_outputs(rng):
    n = pl.var("n")
    second = pl.placeholder((n,), "float64", name="second")
    first = pl.placeholder((n,), "float64", name="first")
    out = pl.compute((n,), lambda i: first[i] - second[i], name="out")
    mod = pl.build(out)
    assert [b.name for b in mod.args] == ["second", "first", "out"]
    s, f = rng.standard_normal((2, 6))
    np.testing.assert_array_equal(mod(s, f), f - s)


def test_arguments_by_name(rng):
    A, B, D = matmul(pl.var("n"), dtype="float64", relu=True)
    mod = pl.build(D)
    a, b = rng.standard_normal((2, 5, 5))
    expected = np.maximum(a @ b, 0.0)
    np.testing.assert_allclose(mod(A=a, B=b), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mod(B=b, A=a), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mod(a, B=b), expected, rtol=1e-12, atol=1e-12)
    d = poisoned((5, 5), "float64")
    assert mod(B=b, D=d, A=a) is None
    np.testing.assert_allclose(d, expected, rtol=1e-12, atol=1e-12)


def test_outputs_are_returned_when_not_passed_and_filled_when_passed(rng):
    n = pl.var("n")
    X = pl.placeholder((n,), "float64", name="X")
    S = pl.compute((n,), lambda i: X[i] + 1.0, name="S")
    P = pl.compute((n,), lambda i: X[i] * 3.0, name="P")
    mod = pl.build([S, P])
    x = rng.standard_normal(17)
    s, p = mod(x)
    np.testing.assert_array_equal(s, x + 1.0)
    np.testing.assert_array_equal(p, x * 3.0)
    s2, p2 = poisoned((17,), "float64"), poisoned((17,), "float64")
    assert mod(x, s2, p2) is None
    np.testing.assert_array_equal(s2, x + 1.0)
    np.testing.assert_array_equal(p2, x * 3.0)
    only_p = mod(x, s2)  # a partial set of outputs: the missing one is allocated and returned
    np.testing.assert_array_equal(only_p, x * 3.0)


def test_an_intermediate_tensor_listed_in_args_is_returned_too(rng):
    A, B, D = matmul(pl.var("n"), dtype="float64", relu=True)
    C = D.inputs[0]
    mod = pl.build(D, args=[A, B, C, D])
    a, b = rng.standard_normal((2, 6, 6))
    c, d = mod(a, b)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-12, atol=1e-12)


def test_a_size_only_outputs_mention_is_passed_by_name():
    n = pl.var("n")
    R = pl.compute((n,), lambda i: i * 3 - 1, name="R")
    mod = pl.build(R)
    out = mod(n=11)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.arange(11) * 3 - 1)
    filled = poisoned((6,), "int64")          # or bound from the output's shape
    assert mod(filled) is None
    np.testing.assert_array_equal(filled, np.arange(6) * 3 - 1)


def test_shapes_affine_in_a_size_parameter(rng):
    """``out[i] = x[i] + x[i+1] + x[i+2]`` with x of shape n + 2: n is solved from x."""
    n = pl.var("n")
    x = pl.placeholder((n + 2,), "float32", name="x")
    out = pl.compute((n,), lambda i: x[i] + x[i + 1] + x[i + 2], name="out")
    mod = pl.build(out)
    xv = rng.standard_normal(23, dtype="float32")
    o = poisoned((21,), "float32")
    mod(xv, o)
    np.testing.assert_allclose(o, xv[:-2] + xv[1:-1] + xv[2:], rtol=1e-6)


# module features ----------------------------------------------------------------------------------

def test_second_build_of_the_same_program_does_not_run_the_compiler(fresh_cache):
    def program():
        return matmul(pl.var("n"), relu=True)[2]

    first = pl.build(program())
    assert not first.cache_hit
    compiles = STATS.compiles
    second = pl.build(program())           # new tensor objects, the same program
    assert STATS.compiles == compiles
    assert second.cache_hit
    assert second.source == first.source
    third = pl.build(program(), fast_math=True)  # other flags: a different binary
    assert STATS.compiles == compiles + 1
    assert not third.cache_hit


def test_source_is_readable_c_named_after_the_users_axes():
    _, _, D = matmul(pl.var("n"), relu=True)
    src = pl.build(D).source
    assert "restrict" in src
    for axis in ("i", "j", "k"):
        assert f"for (int64_t {axis} = 0; {axis} < n; {axis}++)" in src


def test_fast_math_build_still_matches(rng):
    _, _, D = matmul(pl.var("n"), dtype="float64", relu=True)
    mod = pl.build(D, fast_math=True)
    a, b = rng.standard_normal((2, 11, 11))
    np.testing.assert_allclose(mod(a, b), np.maximum(a @ b, 0.0), rtol=1e-9, atol=1e-9)


def test_benchmark_returns_a_positive_median(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    mod = pl.build(B)
    a = rng.standard_normal(101, dtype="float32")
    b = poisoned((101,), "float32")
    seconds = mod.benchmark(a, b, repeat=3, warmup=1, min_time=1e-4)
    assert 0 < seconds < 1
    np.testing.assert_array_equal(b, a * np.float32(2.0))


@pytest.mark.parametrize("name", ["my_kernel", "abs", "log", "exp", "sqrt", "malloc", "free",
                                  "int", "main", "pl_helper"])
def test_any_kernel_name_builds(rng, name):
    """Names that C's keywords or the standard headers take are renamed, not a gcc error."""
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    B = pl.compute((n,), lambda i: pl.exp(A[i]) + pl.abs(A[i]), name="B")
    mod = pl.build(B, name=name)
    a = rng.standard_normal(9)
    np.testing.assert_allclose(mod(a), np.exp(a) + np.abs(a), rtol=1e-12)


@pytest.mark.parametrize("tensor_name", ["log", "tanh", "abs", "pl_max_f32", "free"])
def test_any_output_tensor_name_builds(rng, tensor_name):
    n = pl.var("n")
    A = pl.placeholder((n,), "float64", name="A")
    B = pl.compute((n,), lambda i: pl.maximum(A[i], 0.5), name=tensor_name)
    a = rng.standard_normal(9)
    np.testing.assert_array_equal(pl.build(B)(a), np.maximum(a, 0.5))


@pytest.mark.parametrize("where", ["buffer", "iterator", "param"])
def test_names_of_math_functions_do_not_shadow_them(rng, where):
    n = pl.var("expf" if where == "param" else "n")
    A = pl.placeholder((n,), "float32", name="expf" if where == "buffer" else "A")
    if where == "iterator":
        B = pl.compute((n,), lambda expf: pl.exp(A[expf]), name="B")
    else:
        B = pl.compute((n,), lambda i: pl.exp(A[i]), name="B")
    a = rng.standard_normal(9, dtype="float32")
    np.testing.assert_allclose(pl.build(B)(a), np.exp(a), rtol=1e-6)


# check=True: the reference interpreter as the oracle ---------------------------------------------

def test_check_runs_the_reference_interpreter_and_accepts_a_correct_module(rng):
    A, B, D = matmul(pl.var("n"), relu=True)
    mod = pl.build(D, check=True)
    a, b = rng.standard_normal((2, 7, 7), dtype="float32")
    np.testing.assert_allclose(mod(a, b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def test_check_refuses_a_module_whose_results_differ(monkeypatch):
    import polyloop.codegen

    right = polyloop.codegen.generate_c_unit

    def wrong(kernel, **options):   # a code generator with a bug: the reduction subtracts
        source, sites = right(kernel, **options)
        return source.replace("+=", "-="), sites

    monkeypatch.setattr(polyloop.codegen, "generate_c_unit", wrong)
    _, _, D = matmul(pl.var("n"), relu=True)
    with pytest.raises(pl.BuildError, match=r"check failed.*reference interpreter"):
        pl.build(D, check=True)
    pl.build(D)   # without check the wrong module is not noticed


# programs built directly ------------------------------------------------------------------------

def seidel_1d() -> pl.Program:
    """T in-place sweeps ``A[i] = (A[i-1] + A[i] + A[i+1]) / 3`` over the interior of A."""
    from polyloop.ir.expr import Var
    from polyloop.ir.program import param
    n = param("n")
    A = pl.Buffer("A", (n,), pl.DType.FLOAT64, pl.BufferRole.INOUT)
    i = Var("i")
    S = pl.Statement("S", ("t", "i"), "[T, n] -> { S[t, i] : 0 <= t < T and 1 <= i < n - 1 }",
                     "A", (i,), (A[i - 1] + A[i] + A[i + 1]) / 3.0)
    return pl.Program("seidel_1d", (A,), (S,), ("T", "n"), ("A",))


def test_an_in_place_program_updates_its_argument(rng):
    mod = pl.build(seidel_1d(), check=True)
    assert mod.signature == "seidel_1d(A: inout float64[n]) -> None"
    a = rng.standard_normal(13)
    expected = a.copy()
    for _ in range(4):
        for i in range(1, 12):
            expected[i] = (expected[i - 1] + expected[i] + expected[i + 1]) / 3.0
    assert mod(a, T=4) is None
    np.testing.assert_allclose(a, expected, rtol=1e-14)
    with pytest.raises(pl.ArgumentError, match=r"'T'.*pass it by name"):
        mod(a)


def test_check_compares_arrays_updated_in_place(monkeypatch):
    import polyloop.codegen

    right = polyloop.codegen.generate_c_unit

    def wrong(kernel, **options):
        source, sites = right(kernel, **options)
        return source.replace("/ 3.0", "/ 3.5"), sites
    monkeypatch.setattr(polyloop.codegen, "generate_c_unit", wrong)
    with pytest.raises(pl.BuildError, match=r"check failed"):
        pl.build(seidel_1d(), check=True)


def test_check_runs_at_sizes_that_satisfy_the_assumptions():
    knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }", "out[i, j] = 2 * a[i, j]",
                         assumptions="m >= n + 3 and n >= 20 and n mod 4 = 0")
    mod = pl.build(knl, check=True)      # random sizes 5..11 would break every assumption
    a = np.ones((24, 27), "float32")
    np.testing.assert_array_equal(mod(a), 2 * a)
