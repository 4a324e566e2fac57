# SPDX-License-Identifier: Apache-2.0
"""Every wrong call raises ArgumentError naming the argument, the rule and the given value."""
import contextlib

import numpy as np
import pytest

from polyloop.errors import ArgumentError, BuildError, PolyloopError
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var
from polyloop.ir.program import Buffer, BufferRole, param
from polyloop.runtime import Module, compile_c


def f32(*shape):
    return np.ones(shape, dtype=np.float32)


@contextlib.contextmanager
def raises(*fragments):
    """Expect an ArgumentError whose message contains every fragment."""
    with pytest.raises(ArgumentError) as info:
        yield
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_argument_error_is_a_polyloop_error():
    assert issubclass(ArgumentError, PolyloopError)


def test_missing_input(kernel):
    with raises("missing argument 'B'", "float32[n]", "B=..."):
        kernel("vadd")(f32(4))


def test_missing_inout(kernel):
    with raises("missing argument 'x'", "inout"):
        kernel("scale_inplace")(np.array(2.0))


def test_unknown_keyword(kernel):
    with raises("unknown argument 'X'", "A, B, C", "size parameters n"):
        kernel("vadd")(f32(4), f32(4), X=f32(4))


def test_too_many_positionals(kernel):
    with raises("at most 3 arrays", "A, B, C", "got 4"):
        kernel("vadd")(f32(4), f32(4), f32(4), f32(4))


def test_argument_given_twice(kernel):
    with raises("'A' twice"):
        kernel("vadd")(f32(4), f32(4), A=f32(4))


def test_not_an_array(kernel):
    with raises("argument 'A'", "numpy.ndarray", "float32[n]", "got list", "np.asarray"):
        kernel("vadd")([1.0, 2.0], f32(2))


def test_a_python_number_for_a_scalar_input(kernel):
    x = np.ones(3)
    kernel("scale_inplace")(2.0, x)         # a read-only 0-d argument takes a number
    np.testing.assert_array_equal(x, 2.0 * np.ones(3))
    with raises("argument 'alpha'", "numpy.ndarray", "float64[]", "got str"):
        kernel("scale_inplace")("2.0", np.ones(3))


def test_wrong_rank(kernel):
    with raises("argument 'B'", "1 dimension", "float32[n]", "shape (2, 3)"):
        kernel("vadd")(f32(6), f32(2, 3))


def test_wrong_dtype(kernel):
    with raises("argument 'A'", "dtype float32", "got float64", "A.astype(np.float32)"):
        kernel("vadd")(np.ones(4), f32(4))


@pytest.mark.parametrize("view", [lambda a: a[::2], lambda a: a.reshape(4, 4)[:, 1]],
                         ids=["every-other", "column"])
def test_strided_view(kernel, view):
    strided = view(f32(16))
    assert not strided.flags.c_contiguous
    with raises("argument 'A'", "C-contiguous", "np.ascontiguousarray(A)"):
        kernel("vadd")(strided, f32(strided.shape[0]))


def test_fortran_order(kernel):
    a = np.asfortranarray(np.ones((3, 4)))
    with raises("argument 'A'", "C-contiguous"):
        kernel("scale2d")(a, np.ones(4))


def test_read_only_output(kernel):
    c = f32(4)
    c.setflags(write=False)
    with raises("argument 'C'", "read-only", "C.copy()"):
        kernel("vadd")(f32(4), f32(4), c)


def test_read_only_inout(kernel):
    x = np.ones(3)
    x.setflags(write=False)
    with raises("argument 'x'", "read-only"):
        kernel("scale_inplace")(np.array(2.0), x)


def test_output_is_an_input(kernel):
    a = f32(4)
    with raises("argument 'C'", "shares memory with argument 'A'"):
        kernel("vadd")(a, f32(4), a)


def test_output_overlaps_an_input(kernel):
    whole = f32(20)
    with raises("argument 'C'", "shares memory with argument 'B'"):
        kernel("vadd")(f32(10), whole[:10], whole[5:15])


def test_two_outputs_overlap(kernel):
    s = np.ones(5)
    with raises("argument 's'", "shares memory with argument 'd'"):
        kernel("sumdiff")(np.ones(5), np.ones(5), s, s)


def test_inout_overlaps_an_input(kernel):
    x = np.ones(4)
    with raises("argument 'x'", "shares memory with argument 'alpha'"):
        kernel("scale_inplace")(x[1:2].reshape(()), x)


def test_constant_dimension_mismatch(kernel):
    with raises("argument 'rgb'", "float32[n, 3]", "shape (5, 4)", "rgb.shape[1] must be 3",
                "got 4"):
        kernel("gray")(f32(5, 4))


def test_inconsistent_size(kernel):
    with raises("inconsistent size 'n'", "n = 64 from A.shape[0] but 65 from B.shape[0]"):
        kernel("vadd")(f32(64), f32(65))


def test_inconsistent_size_in_the_second_dimension(kernel):
    with raises("m = 4 from A.shape[1] but 5 from b.shape[0]"):
        kernel("scale2d")(np.ones((3, 4)), np.ones(5))


def test_output_shape_mismatch(kernel):
    with raises("n = 4 from A.shape[0] but 5 from C.shape[0]", "argument 'C'", "float32[n]",
                "shape (5,)"):
        kernel("vadd")(f32(4), f32(4), f32(5))


def test_derived_dimension_mismatch(kernel):
    with raises("n = 8 from x.shape[0] = 10 = n + 2 but 9 from out.shape[0]", "argument 'out'"):
        kernel("stencil")(f32(10), f32(9))


def test_derived_dimension_disagrees_with_a_given_size(kernel):
    with raises("argument 'x'", "float32[n + 2]", "x.shape[0] must be n + 2 = 7, got 10",
                "n = 5 given as n=5"):
        kernel("stencil")(f32(10), n=5)


def test_given_size_disagrees_with_a_shape(kernel):
    with raises("n = 5 given as n=5 but 7 from A.shape[0]"):
        kernel("vadd")(f32(7), f32(7), n=5)


def test_size_that_cannot_be_inferred(kernel):
    with raises("size parameter 'n'", "cannot be inferred", "iota(..., n=...)"):
        kernel("iota")(k=3)
    with raises("size parameter 'k'", "cannot be inferred", "k=..."):
        kernel("iota")(np.empty(3, dtype=np.int64))


def test_no_integer_solution(kernel):
    with raises("argument 'x'", "x.shape[0] = 7 is not 2 * n for any integer n"):
        kernel("pairsum")(np.ones(7, dtype=np.int32))


@pytest.mark.parametrize("size", [0, 1])
def test_negative_inferred_size(kernel, size):
    with raises("size parameter 'n'", f"would be {size - 2}", ">= 0"):
        kernel("stencil")(f32(size))


def test_negative_given_size(kernel):
    with raises("size parameter 'n'", ">= 0", "got -3"):
        kernel("iota")(n=-3, k=0)


@pytest.mark.parametrize("value", [2.5, "3", True, None])
def test_size_must_be_an_integer(kernel, value):
    with raises("size parameter 'n'", "must be an integer"):
        kernel("iota")(n=value, k=0)


def test_numpy_integer_sizes_are_accepted(kernel):
    out = kernel("iota")(n=np.int32(3), k=np.int64(1))
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_a_failed_check_does_not_run_the_kernel(kernel):
    calls = np.zeros(1, dtype=np.int64)
    with pytest.raises(ArgumentError):
        kernel("counter")(calls, n=1)
    assert calls[0] == 0


# Module construction: signatures the calling convention cannot express ----------------------

def vector(name, role=BufferRole.INPUT, dim=None):
    return Buffer(name, (param("n") if dim is None else dim,), DType.FLOAT32, role)


def vadd_module(args, params=("n",), entry="vadd"):
    library = compile_c(VADD_SOURCE, name="vadd")
    return Module(library, entry=entry, args=args, params=params, source=VADD_SOURCE)


VADD_SOURCE = """#include <stdint.h>
int32_t vadd(void **args, const int64_t *params) { return 0; }
"""


def test_a_temporary_cannot_be_an_argument():
    with pytest.raises(PolyloopError, match="'T' is a temporary"):
        vadd_module((vector("A"), vector("T", BufferRole.TEMP)))


def test_a_shape_may_only_use_the_size_parameters():
    with pytest.raises(PolyloopError, match="uses 'm'"):
        vadd_module((vector("A", dim=param("m")),))
    with pytest.raises(PolyloopError, match="uses 'i'"):
        vadd_module((vector("A", dim=Var("i")),))


def test_names_are_unique():
    with pytest.raises(PolyloopError, match="used twice"):
        vadd_module((vector("A"), vector("A")))
    with pytest.raises(PolyloopError, match="used twice"):
        vadd_module((vector("n"),))


def test_missing_entry_point():
    with pytest.raises(BuildError, match="no function 'nope'"):
        vadd_module((vector("A"),), entry="nope")
