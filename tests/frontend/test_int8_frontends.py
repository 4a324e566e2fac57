# SPDX-License-Identifier: Apache-2.0
"""int8 / uint8 kernels in the three front ends: a widening matmul with a requantized result,
equal to NumPy's integer result."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl


def reference(a, b, scale, zero_point):
    c = a.astype(np.int32) @ b.astype(np.int32)
    return np.clip(np.round(c.astype(np.float32) * np.float32(scale)) + zero_point,
                   -128, 127).astype(np.int8)


def script_matmul(m: int, n: int, K: int, Y: pl.Buffer[("m", "n"), "int8"],
                  A: pl.Buffer[("m", "K"), "uint8"], B: pl.Buffer[("K", "n"), "int8"]):
    C = pl.alloc((m, n), "int32")
    for i in range(m):
        for j in range(n):
            C[i, j] = 0
            for k in range(K):
                C[i, j] += np.int32(A[i, k]) * B[k, j].astype("int32")
            Y[i, j] = pl.requantize(C[i, j], 0.01, 3, dtype=np.int8)


def te_matmul():
    m, n, K = pl.var("m"), pl.var("n"), pl.var("K")
    A = pl.placeholder((m, K), "uint8", name="A")
    B = pl.placeholder((K, n), "int8", name="B")
    k = pl.reduce_axis((0, K), name="k")
    C = pl.compute((m, n), lambda i, j: pl.sum(A[i, k].astype("int32") * B[k, j].astype("int32"),
                                               axis=k), name="C")
    return pl.compute((m, n), lambda i, j: pl.requantize(C[i, j], 0.01, 3, "int8"), name="Y")


def kernel_matmul():
    return pl.make_kernel(
        "{ [i, j, k] : 0 <= i < m and 0 <= j < n and 0 <= k < K }",
        ["<int32> acc[i, j] = sum(k, int32(A[i, k]) * int32(B[k, j]))",
         "Y[i, j] = requantize(acc[i, j], 0.01, 3, int8)"],
        [pl.ArrayArg("A", "uint8", shape=("m", "K")), pl.ArrayArg("B", "int8", shape=("K", "n")),
         pl.ArrayArg("Y", "int8", shape=("m", "n"))])


@pytest.mark.parametrize("front_end", ["te", "kernel", "script"])
def test_requantized_int8_matmul(front_end):
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (7, 19)).astype(np.uint8)
    b = rng.integers(-128, 128, (19, 5)).astype(np.int8)
    if front_end == "script":
        y = np.full((7, 5), 99, np.int8)
        pl.build(pl.script(script_matmul))(y, a, b)
    elif front_end == "kernel":
        y = pl.build(kernel_matmul())(A=a, B=b)
    else:
        y = pl.build(te_matmul())(a, b)
    np.testing.assert_array_equal(y, reference(a, b, 0.01, 3))


def test_spelling_errors():
    def bad(n: int, Y: pl.Buffer[("n",), "int8"], X: pl.Buffer[("n",), "int32"]):
        for i in range(n):
            Y[i] = pl.saturate(X[i], np.float128)
    with pytest.raises(pl.ParseError, match="is not a dtype"):
        pl.script(bad)
    with pytest.raises(pl.ParseError, match=r"requantize\(\) takes 2 to 3 values and the name"):
        pl.make_kernel("{ [i] : 0 <= i < n }", "Y[i] = requantize(X[i], 0.5)",
                       [pl.ArrayArg("X", "int32", shape=("n",)),
                        pl.ArrayArg("Y", "int8", shape=("n",))])
