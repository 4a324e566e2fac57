# SPDX-License-Identifier: Apache-2.0
"""PolyBench kernels written as plain loops with ``@pl.script``, from their textbook definitions
(gemm, 2mm, atax, bicg, mvt, gesummv, syrk, trmm, lu, cholesky, jacobi-1d, jacobi-2d, seidel-2d,
heat-3d, fdtd-2d). Scalars alpha/beta are the PolyBench constants 1.5 and 1.2; time loops run
over the length of a ``T``/``fict`` buffer so every size is a parameter."""
from __future__ import annotations

import polyloop as pl

# ruff: noqa: F821 - sizes are the parameters named in the shapes
@pl.script
def gemm(C: pl.Buffer[("ni", "nj"), "float64"], A: pl.Buffer[("ni", "nk"), "float64"], B: pl.Buffer[("nk", "nj"), "float64"]):
    for i in range(ni):
        for j in range(nj):
            C[i, j] *= 1.2
        for k in range(nk):
            for j in range(nj):
                C[i, j] += 1.5 * A[i, k] * B[k, j]

@pl.script
def two_mm(tmp: pl.Buffer[("ni", "nj"), "float64"], A: pl.Buffer[("ni", "nk"), "float64"], B: pl.Buffer[("nk", "nj"), "float64"],
           C: pl.Buffer[("nj", "nl"), "float64"], D: pl.Buffer[("ni", "nl"), "float64"]):
    for i in range(ni):
        for j in range(nj):
            tmp[i, j] = 0.0
            for k in range(nk):
                tmp[i, j] += 1.5 * A[i, k] * B[k, j]
    for i in range(ni):
        for j in range(nl):
            D[i, j] *= 1.2
            for k in range(nj):
                D[i, j] += tmp[i, k] * C[k, j]

@pl.script
def atax(A: pl.Buffer[("m", "n"), "float64"], x: pl.Buffer[("n",), "float64"], y: pl.Buffer[("n",), "float64"], tmp: pl.Buffer[("m",), "float64"]):
    for i in range(n):
        y[i] = 0.0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i, j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i, j] * tmp[i]

@pl.script
def bicg(A: pl.Buffer[("n", "m"), "float64"], s: pl.Buffer[("m",), "float64"], q: pl.Buffer[("n",), "float64"], p: pl.Buffer[("m",), "float64"], r: pl.Buffer[("n",), "float64"]):
    for i in range(m):
        s[i] = 0.0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]

@pl.script
def mvt(x1: pl.Buffer[("n",), "float64"], x2: pl.Buffer[("n",), "float64"], y1: pl.Buffer[("n",), "float64"], y2: pl.Buffer[("n",), "float64"], A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i, j] * y1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j, i] * y2[j]

@pl.script
def gesummv(A: pl.Buffer[("n", "n"), "float64"], B: pl.Buffer[("n", "n"), "float64"], tmp: pl.Buffer[("n",), "float64"], x: pl.Buffer[("n",), "float64"], y: pl.Buffer[("n",), "float64"]):
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = A[i, j] * x[j] + tmp[i]
            y[i] = B[i, j] * x[j] + y[i]
        y[i] = 1.5 * tmp[i] + 1.2 * y[i]

@pl.script
def syrk(C: pl.Buffer[("n", "n"), "float64"], A: pl.Buffer[("n", "m"), "float64"]):
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= 1.2
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += 1.5 * A[i, k] * A[j, k]

@pl.script
def trmm(A: pl.Buffer[("m", "m"), "float64"], B: pl.Buffer[("m", "n"), "float64"]):
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = 1.5 * B[i, j]

@pl.script
def lu(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]

@pl.script
def cholesky(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = pl.sqrt(A[i, i])

@pl.script
def jacobi_1d(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"], T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])

@pl.script
def jacobi_2d(A: pl.Buffer[("n", "n"), "float64"], B: pl.Buffer[("n", "n"), "float64"], T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, 1 + j] + A[1 + i, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, 1 + j] + B[1 + i, j] + B[i - 1, j])

@pl.script
def seidel_2d(A: pl.Buffer[("n", "n"), "float64"], T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j] + A[i, j + 1] + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0

@pl.script
def heat_3d(A: pl.Buffer[("n", "n", "n"), "float64"], B: pl.Buffer[("n", "n", "n"), "float64"], T: pl.Buffer[("tsteps",), "float64"]):
    for t in range(1, tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    B[i, j, k] = 0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k]) + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k]) + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1]) + A[i, j, k]
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    A[i, j, k] = 0.125 * (B[i + 1, j, k] - 2.0 * B[i, j, k] + B[i - 1, j, k]) + 0.125 * (B[i, j + 1, k] - 2.0 * B[i, j, k] + B[i, j - 1, k]) + 0.125 * (B[i, j, k + 1] - 2.0 * B[i, j, k] + B[i, j, k - 1]) + B[i, j, k]

@pl.script
def fdtd_2d(ex: pl.Buffer[("nx", "ny"), "float64"], ey: pl.Buffer[("nx", "ny"), "float64"], hz: pl.Buffer[("nx", "ny"), "float64"], fict: pl.Buffer[("tmax",), "float64"]):
    assert nx >= 1
    for t in range(tmax):
        for j in range(ny):
            ey[0, j] = fict[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i, j] = ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i, j] = ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i, j] = hz[i, j] - 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])

KERNELS = [gemm, two_mm, atax, bicg, mvt, gesummv, syrk, trmm, lu, cholesky, jacobi_1d, jacobi_2d, seidel_2d, heat_3d, fdtd_2d]
