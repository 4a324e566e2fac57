# SPDX-License-Identifier: Apache-2.0
"""Bad input gets a clear, typed error that names what is wrong; nothing crashes.

Every case asserts the exception's class and that its message names the offending object.
"""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime import compile_c


@pytest.fixture(scope="module")
def add():
    """``C[i, j] = A[i, j] + B[j]`` with A: (n, n), B: (n,)."""
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n,), "float32", name="B")
    C = pl.compute((n, n), lambda i, j: A[i, j] + B[j], name="C")
    return pl.build(C)


def f32(*shape: int) -> np.ndarray:
    return np.ones(shape, "float32")


# calling a module ---------------------------------------------------------------------------------

def test_the_happy_call_works(add):
    a = np.random.default_rng(5).standard_normal((3, 3)).astype("float32")
    b = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(add(a, b), a + b)


@pytest.mark.parametrize("args, pattern", [
    ((f32(4, 4), f32(5)), r"'B'.*float32\[n\].*\(5,\)"),
    ((f32(4, 4), f32(4), f32(4, 3)), r"'C'.*\(4, 3\)"),
], ids=["input", "output"])
def test_wrong_shape_names_the_argument_and_both_shapes(add, args, pattern):
    with pytest.raises(pl.ArgumentError, match=pattern):
        add(*args)


def test_wrong_dtype_names_the_argument_and_both_dtypes(add):
    with pytest.raises(pl.ArgumentError, match=r"'B'.*float32.*float64"):
        add(f32(4, 4), np.ones(4, "float64"))


def test_wrong_rank_names_the_argument(add):
    with pytest.raises(pl.ArgumentError, match=r"'B'.*1 dimension.*\(4, 1\)"):
        add(f32(4, 4), f32(4, 1))


def test_non_contiguous_array_is_refused(add):
    strided = np.ones((4, 8), "float32")[:, ::2]
    with pytest.raises(pl.ArgumentError, match=r"'A'.*C-contiguous.*ascontiguousarray"):
        add(strided, f32(4))
    with pytest.raises(pl.ArgumentError, match=r"'A'.*C-contiguous"):
        add(np.asfortranarray(np.ones((4, 4), "float32") + np.eye(4, dtype="float32")), f32(4))


def test_missing_argument_is_named(add):
    with pytest.raises(pl.ArgumentError, match=r"missing argument 'B'"):
        add(f32(4, 4))
    with pytest.raises(pl.ArgumentError, match=r"missing argument 'A'"):
        add(B=f32(4))


def test_inconsistent_symbolic_sizes_name_the_size_and_the_arrays(add):
    with pytest.raises(pl.ArgumentError, match=r"inconsistent size 'n'.*A\.shape\[0\].*"
                                               r"A\.shape\[1\]"):
        add(f32(4, 5), f32(5))
    with pytest.raises(pl.ArgumentError, match=r"inconsistent size 'n'.*'B'"):
        add(f32(4, 4), f32(3))


def test_other_wrong_calls(add):
    with pytest.raises(pl.ArgumentError, match=r"'A'.*numpy\.ndarray.*list"):
        add([[1.0]], f32(1))
    with pytest.raises(pl.ArgumentError, match=r"unknown argument 'X'"):
        add(f32(2, 2), f32(2), X=f32(2))
    with pytest.raises(pl.ArgumentError, match=r"at most 3"):
        add(f32(2, 2), f32(2), f32(2, 2), f32(2))
    with pytest.raises(pl.ArgumentError, match=r"'A' twice"):
        add(f32(2, 2), A=f32(2, 2), B=f32(2))


def test_argument_errors_are_polyloop_errors():
    assert issubclass(pl.ArgumentError, pl.PolyloopError)
    assert issubclass(pl.BuildError, pl.PolyloopError)


# defining tensors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, pattern", [
    ((3.5,), r"extent 0.*3\.5.*integers"),
    ((4, np.float64(2.0)), r"extent 1.*integers"),
    ((True,), r"extent 0.*bool"),
    (("n",), r"extent 0.*str"),
    ((-1, 3), r"extent 0.*non-negative.*-1"),
    ((3, pl.var("n") * 0.5), r"extent 1.*integer"),
], ids=["float", "numpy-float", "bool", "string", "negative", "float-expression"])
def test_extents_must_be_non_negative_integers(shape, pattern):
    with pytest.raises(pl.PolyloopError, match=pattern):
        pl.placeholder(shape, "float32")
    with pytest.raises(pl.PolyloopError, match=pattern):
        pl.compute(shape, lambda *ix: 0.0)


def test_numpy_integers_are_valid_extents():
    n = np.int64(6)
    A = pl.placeholder((n, np.int32(2)), "float32", name="A")
    assert [int(d.value) for d in A.shape] == [6, 2]


@pytest.mark.parametrize("dom, pattern", [
    ((0, -3), r"non-negative.*-3"),
    ((5, 2), r"negative extent -3"),
    ((0, 2.5), r"integer"),
], ids=["negative-stop", "stop-below-start", "float"])
def test_reduce_axis_extents(dom, pattern):
    with pytest.raises(pl.PolyloopError, match=pattern):
        pl.reduce_axis(dom)


def test_symbolic_reduce_axis_with_a_negative_extent():
    n = pl.var("n")
    with pytest.raises(pl.PolyloopError, match=r"negative extent -1"):
        pl.reduce_axis((n + 1, n))


def test_reducing_over_an_axis_not_used():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    unused = pl.reduce_axis((0, n), name="unused")
    with pytest.raises(pl.PolyloopError, match=r"axis 'k'.*does not use"):
        pl.compute((n,), lambda i: pl.sum(A[i, i], axis=k))
    with pytest.raises(pl.PolyloopError, match=r"axis 'unused'.*does not use"):
        pl.compute((n,), lambda i: pl.sum(A[i, k], axis=[k, unused]))


def test_reduce_axes_listed_twice_or_named_like_a_size():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    with pytest.raises(pl.PolyloopError, match=r"reduce axis 'k' is listed twice"):
        pl.compute((1,), lambda z: pl.sum(A[k], axis=[k, k]))
    shadow = pl.reduce_axis((0, n), name="n")
    S = pl.compute((1,), lambda z: pl.sum(A[shadow], axis=shadow), name="S")
    with pytest.raises(pl.PolyloopError, match=r"axis 'n' of 'S' has the name of a size"):
        pl.build(S)


def test_an_axis_that_is_not_the_computes_own_is_refused():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    other = pl.reduce_axis((0, n), name="other")
    with pytest.raises(pl.PolyloopError, match=r"uses axis 'k', which is neither one of its own "
                                               r"axes \(i\) nor reduced over"):
        pl.compute((n,), lambda i: A[k])
    with pytest.raises(pl.PolyloopError, match=r"uses axis 'other'.*axis=other"):
        pl.compute((n,), lambda i: pl.sum(B[i, k] * A[other], axis=k))
    leaked = []
    pl.compute((n,), lambda i: leaked.append(i) or A[i])
    with pytest.raises(pl.PolyloopError, match=r"uses axis 'i', which is neither.*\(j\)"):
        pl.compute((n,), lambda j: A[leaked[0]])


def test_reads_built_outside_the_compute_function_are_refused():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    saved = []
    pl.compute((n,), lambda i: saved.append(A[i]) or A[i])
    with pytest.raises(pl.PolyloopError, match=r"reads 'A' through an expression built outside"):
        pl.compute((n,), lambda i: saved[0] * 2.0)


@pytest.mark.parametrize("name", ["my tensor", "1st", "", 3])
def test_tensor_names_must_be_identifiers(name):
    with pytest.raises(pl.PolyloopError, match=r"tensor name .* is not an identifier"):
        pl.placeholder((3,), "float32", name=name)
    with pytest.raises(pl.PolyloopError, match=r"tensor name .* is not an identifier"):
        pl.compute((3,), lambda i: i, name=name)


def test_mixing_dtypes_without_a_cast():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.placeholder((n,), "float64", name="B")
    with pytest.raises(pl.PolyloopError, match=r"float32 and float64.*\.astype"):
        pl.compute((n,), lambda i: A[i] + B[i])
    ok = pl.compute((n,), lambda i: A[i].astype("float64") + B[i], name="ok")
    assert ok.dtype is pl.DType.FLOAT64


@pytest.mark.parametrize("index, pattern", [
    (lambda i: (i, 3), r"constant index 3.*dimension 1 of 'P' \(extent 3\)"),
    (lambda i: (4, 0), r"constant index 4.*dimension 0 of 'P' \(extent 4\)"),
    (lambda i: (i, -1), r"constant index -1.*dimension 1 of 'P'"),
    (lambda i: (i, 1 + 2), r"constant index 3"),
], ids=["past-end", "first-dim", "negative", "folded"])
def test_out_of_range_constant_indices(index, pattern):
    P = pl.placeholder((4, 3), "float32", name="P")
    with pytest.raises(pl.PolyloopError, match=pattern):
        pl.compute((4,), lambda i: P[index(i)])


@pytest.mark.parametrize("body, pattern", [
    (lambda A, n, i: A[n], r"A\[n\] out of bounds"),
    (lambda A, n, i: A[-1], r"A\[-1\]"),
    (lambda A, n, i: A[i + 1], r"A\[i \+ 1\] out of bounds: with n = 1, i = 0 it reads A\[1\]"),
    (lambda A, n, i: pl.where(i <= n - 1, A[i + 1], 0.0), r"A\[i \+ 1\]"),
], ids=["size", "negative", "shifted", "wrong-guard"])
def test_reads_that_can_leave_their_tensor_are_refused_at_build(body, pattern):
    """Refused: at every size where 'B' runs, it reads outside A (a mistake, not a
    precondition; tests/poly/test_preconditions.py has the sizes a kernel is built for)."""
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: body(A, n, i), name="B")
    with pytest.raises(pl.PolyloopError, match=pattern + ".*pl.where"):
        pl.build(B)


def test_guarded_reads_are_in_bounds(rng):
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: pl.where(i + 1 < n, A[i + 1], 0.0)
                   + pl.where(~(i >= 1), 0.0, A[i - 1]), name="B")
    a = rng.standard_normal(10).astype("float32")
    expected = np.append(a[1:], 0) + np.insert(a[:-1], 0, 0)
    np.testing.assert_allclose(pl.build(B)(a), expected, rtol=1e-6)


def test_sizes_that_disagree_between_tensors_are_refused_at_call():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((m,), lambda i: A[i], name="B")
    mod = pl.build(B)
    assert mod.requires == ("n >= m",)
    with pytest.raises(pl.ArgumentError, match=r"needs n >= m; got m = 5 .*, n = 4 .*'B' "
                       r"reads A\[i\] out of bounds"):
        mod(np.ones(4, "float32"), np.zeros(5, "float32"))


def test_other_definition_mistakes():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    with pytest.raises(pl.PolyloopError, match=r"'A' has 2 dimensions, indexed with 1"):
        A[0]
    with pytest.raises(pl.PolyloopError, match=r"index 1 of 'A' is float64"):
        A[0, 1.0]
    with pytest.raises(pl.PolyloopError, match=r"outermost operation"):
        pl.compute((n,), lambda i: pl.sum(A[i, k], axis=k) + 1.0)
    with pytest.raises(pl.PolyloopError, match=r"takes 1 arguments but the shape has 2"):
        pl.compute((n, n), lambda i: A[i, i])
    with pytest.raises(pl.PolyloopError, match=r"unsupported dtype 'complex64'.*float32"):
        pl.placeholder((n,), "complex64")
    with pytest.raises(pl.PolyloopError, match=r"unknown target 'vulkan'"):
        pl.build(pl.compute((n,), lambda i: A[i, i], name="diag"), target="vulkan")
    with pytest.raises(pl.PolyloopError, match=r"missing: \['A'\]"):
        D = pl.compute((n,), lambda i: A[i, i], name="D")
        pl.build(D, args=[D])


def test_argument_lists_given_to_build():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    Z = pl.placeholder((n,), "float32", name="Z")
    D = pl.compute((n,), lambda i: A[i] * 2.0, name="D")
    with pytest.raises(pl.PolyloopError, match=r"args= lists \['Z'\], which the outputs do not use"):
        pl.build(D, args=[A, D, Z])
    with pytest.raises(pl.PolyloopError, match=r"tensor 'A' appears twice in args="):
        pl.build(D, args=[A, D, A])
    with pytest.raises(pl.PolyloopError, match=r"args= takes tensors.*int 3"):
        pl.build(D, args=[A, D, 3])
    with pytest.raises(pl.PolyloopError, match=r"tensor 'D' appears twice in the outputs"):
        pl.build([D, D])


def test_constants_that_do_not_fit_their_type():
    n = pl.var("n")
    I = pl.placeholder((n,), "int32", name="I")
    with pytest.raises(pl.PolyloopError, match=r"constant 1099511627776 does not fit in int32"):
        I[0] + 2**40
    with pytest.raises(pl.PolyloopError, match=r"constant 2\.5 is not an integer"):
        pl.const(2.5, "int64")
    with pytest.raises(pl.PolyloopError, match=r"cannot convert the constant inf to int32"):
        pl.const(float("inf")).astype("int32")


# compiling --------------------------------------------------------------------------------------------

def test_broken_c_is_a_build_error_with_the_compiler_message_and_source_path(fresh_cache):
    with pytest.raises(pl.BuildError) as info:
        compile_c("int x = ;", name="bad")
    message = str(info.value)
    assert "error" in message and "expected expression" in message
    source = next(fresh_cache.glob("bad-*/kernel.c"))
    assert str(source) in message
