# SPDX-License-Identifier: Apache-2.0
"""Calling a Module: results against NumPy, outputs allocated or passed, names, sizes."""
import numpy as np
import pytest

from polyloop.errors import PolyloopError

SIZES = [0, 1, 7, 100, 1023]


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("size", SIZES)
def test_vadd_allocates_and_returns_its_output(kernel, rng, size):
    a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
    c = kernel("vadd")(a, b)
    assert c.dtype == np.float32 and c.shape == (size,)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("size", SIZES)
def test_vadd_writes_every_element_of_a_passed_output(kernel, rng, size):
    a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
    c = np.full(size, np.nan, dtype=np.float32)
    assert kernel("vadd")(a, b, c) is None
    np.testing.assert_array_equal(c, a + b)


def test_arguments_by_name_in_any_order(kernel, rng):
    mod = kernel("vadd")
    a, b = rng.random(9, dtype=np.float32), rng.random(9, dtype=np.float32)
    np.testing.assert_array_equal(mod(B=b, A=a), a + b)
    c = np.full(9, np.nan, dtype=np.float32)
    assert mod(a, C=c, B=b) is None
    np.testing.assert_array_equal(c, a + b)


def test_none_for_an_output_means_allocate_it(kernel, rng):
    a, b = rng.random(5, dtype=np.float32), rng.random(5, dtype=np.float32)
    np.testing.assert_array_equal(kernel("vadd")(a, b, None), a + b)


def test_size_parameter_given_by_name_agrees_with_the_shapes(kernel, rng):
    a, b = rng.random(11, dtype=np.float32), rng.random(11, dtype=np.float32)
    np.testing.assert_array_equal(kernel("vadd")(a, b, n=11), a + b)


@pytest.mark.parametrize("shape", [(3, 5), (17, 1), (1, 31), (0, 4), (64, 65)])
def test_two_dimensional_kernel(kernel, rng, shape):
    a, b = rng.random(shape), rng.random(shape[1])
    c = np.full(shape, np.nan)
    kernel("scale2d")(a, b, c)
    np.testing.assert_allclose(c, 2 * a + b)


@pytest.mark.parametrize("size", [2, 3, 10, 1001])
def test_size_inferred_from_an_offset_dimension(kernel, rng, size):
    x = rng.random(size, dtype=np.float32)
    out = kernel("stencil")(x)                      # n = len(x) - 2
    assert out.shape == (size - 2,)
    np.testing.assert_allclose(out, x[:-2] + x[1:-1] + x[2:], rtol=1e-6)


@pytest.mark.parametrize("size", [0, 1, 6, 99])
def test_size_inferred_from_a_scaled_dimension(kernel, rng, size):
    x = rng.integers(-100, 100, 2 * size, dtype=np.int32)
    y = kernel("pairsum")(x)                        # n = len(x) / 2
    np.testing.assert_array_equal(y, x[0::2] + x[1::2])


def test_several_outputs_are_returned_in_argument_order(kernel, rng):
    a, b = rng.random(13), rng.random(13)
    s, d = kernel("sumdiff")(a, b)
    np.testing.assert_allclose(s, a + b)
    np.testing.assert_allclose(d, a - b)


def test_only_the_outputs_not_passed_are_returned(kernel, rng):
    a, b = rng.random(13), rng.random(13)
    s = np.full(13, np.nan)
    d = kernel("sumdiff")(a, b, s)
    np.testing.assert_allclose(s, a + b)
    np.testing.assert_allclose(d, a - b)


def test_inout_with_a_zero_dimensional_scalar_returns_none(kernel, rng):
    x = rng.random(10)
    expected = 2.5 * x
    assert kernel("scale_inplace")(np.array(2.5), x) is None
    np.testing.assert_allclose(x, expected)


def test_sizes_that_no_shape_determines_are_passed_by_name(kernel):
    out = kernel("iota")(n=5, k=10)
    np.testing.assert_array_equal(out, np.arange(10, 15))
    given = np.full(3, -1, dtype=np.int64)
    assert kernel("iota")(given, k=0) is None
    np.testing.assert_array_equal(given, [0, 1, 2])


def test_constant_dimension(kernel, rng):
    rgb = rng.random((6, 3), dtype=np.float32)
    np.testing.assert_allclose(kernel("gray")(rgb), rgb.mean(axis=1), rtol=1e-6)


def test_repeated_calls_with_changing_sizes(kernel, rng):
    mod = kernel("vadd")
    for size in [3, 8, 3, 5, 8]:
        a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
        np.testing.assert_array_equal(mod(a, b), a + b)


def test_inputs_may_share_memory_with_each_other(kernel, rng):
    a = rng.random(8, dtype=np.float32)
    np.testing.assert_array_equal(kernel("vadd")(a, a), 2 * a)


def test_adjacent_slices_of_one_array_do_not_overlap(kernel, rng):
    whole = rng.random(30, dtype=np.float32)
    a, b, c = whole[:10], whole[10:20], whole[20:]
    expected = a + b
    kernel("vadd")(a, b, c)
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize("code, meaning", [(1, "out of memory"), (7, "status 7")])
def test_a_failure_status_raises(kernel, code, meaning):
    with pytest.raises(PolyloopError, match=meaning):
        kernel("status")(np.array(code, dtype=np.int32))
    assert kernel("status")(np.array(0, dtype=np.int32)) is None


def test_signature_source_and_repr(kernel):
    mod = kernel("vadd")
    assert mod.signature == "vadd(A: float32[n], B: float32[n]) -> C: float32[n]"
    assert kernel("sumdiff").signature == (
        "sumdiff(a: float64[n], b: float64[n]) -> (s: float64[n], d: float64[n])")
    assert kernel("scale_inplace").signature == (
        "scale_inplace(alpha: float64[], x: inout float64[n]) -> None")
    assert kernel("stencil").signature == "stencil(x: float32[n + 2]) -> out: float32[n]"
    assert "c[i] = a[i] + b[i]" in mod.source
    assert mod.signature in repr(mod) and "target='c'" in repr(mod)
    assert mod.cache_hit is mod.library.cache_hit
