# SPDX-License-Identifier: Apache-2.0
"""Hand-written kernels in the runtime calling convention, compiled once per session.

Every kernel is ``int32_t ENTRY(void **args, const int64_t *params)``, as the code generator
emits it. The session's temporary compile cache (``session_cache``) and the per-test empty
cache (``fresh_cache``) come from ``tests/conftest.py``.
"""
from __future__ import annotations

import pytest

from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Expr, const
from polyloop.ir.program import Buffer, BufferRole, param
from polyloop.runtime import Module, compile_c

n, m = param("n"), param("m")

PRELUDE = "#include <stdint.h>\n#include <stdlib.h>\n"

VADD = PRELUDE + r"""
int32_t vadd(void **args, const int64_t *params) {
    const float *restrict a = args[0], *restrict b = args[1];
    float *restrict c = args[2];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
    return 0;
}
"""

# C[i, j] = 2 * A[i, j] + b[j]   with A: (n, m), b: (m,), C: (n, m)
SCALE2D = PRELUDE + r"""
int32_t scale2d(void **args, const int64_t *params) {
    const double *restrict a = args[0], *restrict b = args[1];
    double *restrict c = args[2];
    int64_t n = params[0], m = params[1];
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) c[i * m + j] = 2.0 * a[i * m + j] + b[j];
    return 0;
}
"""

# out[i] = x[i] + x[i + 1] + x[i + 2]   with x: (n + 2,), out: (n,)
STENCIL = PRELUDE + r"""
int32_t stencil(void **args, const int64_t *params) {
    const float *restrict x = args[0];
    float *restrict out = args[1];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) out[i] = x[i] + x[i + 1] + x[i + 2];
    return 0;
}
"""

# y[i] = x[2i] + x[2i + 1]   with x: (2n,), y: (n,)
PAIRSUM = PRELUDE + r"""
int32_t pairsum(void **args, const int64_t *params) {
    const int32_t *restrict x = args[0];
    int32_t *restrict y = args[1];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) y[i] = x[2 * i] + x[2 * i + 1];
    return 0;
}
"""

# s = a + b, d = a - b: two outputs
SUMDIFF = PRELUDE + r"""
int32_t sumdiff(void **args, const int64_t *params) {
    const double *restrict a = args[0], *restrict b = args[1];
    double *restrict s = args[2], *restrict d = args[3];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) { s[i] = a[i] + b[i]; d[i] = a[i] - b[i]; }
    return 0;
}
"""

# x[i] *= alpha   with alpha a 0-d input and x an inout: no outputs
SCALE_INPLACE = PRELUDE + r"""
int32_t scale_inplace(void **args, const int64_t *params) {
    const double *restrict alpha = args[0];
    double *restrict x = args[1];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) x[i] *= alpha[0];
    return 0;
}
"""

# out[i] = i + k: n appears only in the output's shape, k in no shape at all
IOTA = PRELUDE + r"""
int32_t iota(void **args, const int64_t *params) {
    int64_t *restrict out = args[0];
    int64_t n = params[0], k = params[1];
    for (int64_t i = 0; i < n; i++) out[i] = i + k;
    return 0;
}
"""

# gray[i] = mean of rgb[i, 0:3]   with a constant dimension
GRAY = PRELUDE + r"""
int32_t gray(void **args, const int64_t *params) {
    const float *restrict rgb = args[0];
    float *restrict g = args[1];
    int64_t n = params[0];
    for (int64_t i = 0; i < n; i++) g[i] = (rgb[3 * i] + rgb[3 * i + 1] + rgb[3 * i + 2]) / 3.0f;
    return 0;
}
"""

# Returns the status stored in its 0-d input: 1 is the allocation-failure code.
STATUS = PRELUDE + r"""
int32_t status(void **args, const int64_t *params) {
    (void)params;
    return ((const int32_t *)args[0])[0];
}
"""

# calls[0] += 1: counts how often the C function ran.
COUNTER = PRELUDE + r"""
int32_t counter(void **args, const int64_t *params) {
    (void)params;
    ((int64_t *)args[0])[0] += 1;
    return 0;
}
"""


def buf(name: str, shape: tuple[Expr | int, ...], dtype: DType = DType.FLOAT32,
        role: BufferRole = BufferRole.INPUT) -> Buffer:
    dims = tuple(const(d) if isinstance(d, int) else d for d in shape)
    return Buffer(name, dims, dtype, role)


IN, OUT, INOUT = BufferRole.INPUT, BufferRole.OUTPUT, BufferRole.INOUT
F32, F64, I32, I64 = DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64

SIGNATURES = {
    "vadd": (VADD, (buf("A", (n,)), buf("B", (n,)), buf("C", (n,), role=OUT)), ("n",)),
    "scale2d": (SCALE2D, (buf("A", (n, m), F64), buf("b", (m,), F64),
                          buf("C", (n, m), F64, OUT)), ("n", "m")),
    "stencil": (STENCIL, (buf("x", (n + 2,)), buf("out", (n,), role=OUT)), ("n",)),
    "pairsum": (PAIRSUM, (buf("x", (2 * n,), I32), buf("y", (n,), I32, OUT)), ("n",)),
    "sumdiff": (SUMDIFF, (buf("a", (n,), F64), buf("b", (n,), F64), buf("s", (n,), F64, OUT),
                          buf("d", (n,), F64, OUT)), ("n",)),
    "scale_inplace": (SCALE_INPLACE, (buf("alpha", (), F64), buf("x", (n,), F64, INOUT)),
                      ("n",)),
    "iota": (IOTA, (buf("out", (n,), I64, OUT),), ("n", "k")),
    "gray": (GRAY, (buf("rgb", (n, 3)), buf("g", (n,), role=OUT)), ("n",)),
    "status": (STATUS, (buf("code", (), I32),), ()),
    "counter": (COUNTER, (buf("calls", (1,), I64, INOUT),), ()),
}


@pytest.fixture(scope="session")
def kernel(session_cache):
    """``kernel("vadd")``: the named hand-written kernel as a Module, compiled once."""
    built: dict[str, Module] = {}

    def get(name: str) -> Module:
        if name not in built:
            source, args, params = SIGNATURES[name]
            built[name] = Module(compile_c(source, name=name), entry=name, args=args,
                                 params=params, source=source)
        return built[name]
    return get
