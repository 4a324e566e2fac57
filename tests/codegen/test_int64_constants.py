# SPDX-License-Identifier: Apache-2.0
"""Constants of a loop domain that the generated int64 code cannot represent (a step or a
modulus of 2**63 or more) are refused at build time, naming the constant, on every target."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.opencl import platform_available

OPENCL, WHY = platform_available()
TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.skipif(
    not OPENCL, reason=f"OpenCL unavailable: {WHY}"))]


def every(modulus: int):
    """``out[i] += 1`` where ``i mod modulus = 5``: a loop from 5 stepping by ``modulus``."""
    return pl.make_kernel(f"{{ [i] : 0 <= i < n and i mod {modulus} = 5 }}",
                          "out[i] = out[i] + 1.0", args=[pl.ArrayArg("out", "float64", ("n",))])


@pytest.mark.parametrize("modulus", [2**63, 10**19, 2**64 + 5])
def test_a_step_beyond_int64_is_refused_at_build_time(modulus):
    with pytest.raises(pl.BuildError, match=rf"steps by {modulus}.*int64"):
        pl.build(every(modulus))


def test_a_script_range_step_beyond_int64_is_refused():
    prog = pl.script("""
def f(A: pl.Buffer[("n",), "float64"]):
    for i in range(0, n, 10000000000000000000):
        A[i] = 1.0
""")
    with pytest.raises(pl.BuildError, match="steps by 10000000000000000000"):
        pl.build(prog)


def test_an_expression_constant_beyond_int64_is_refused():
    n = pl.var("n")
    A = pl.placeholder((n,), "int64", name="A")
    B = pl.compute((n,), lambda i: A[i] % 10**19, name="B")
    with pytest.raises(pl.BuildError, match="constant 10000000000000000000 .* int64"):
        pl.build(B)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("modulus", [7, 2**62])
def test_large_representable_steps_build_and_run(modulus, target, rng):
    out = rng.standard_normal(13)
    expected = out + ((np.arange(13) % modulus) == 5)
    pl.build(every(modulus), target=target)(out)
    np.testing.assert_array_equal(out, expected)
