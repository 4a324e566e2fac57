# SPDX-License-Identifier: Apache-2.0
"""The 30 kernels of PolyBench/C 4.2.1, transcribed statement for statement from the C sources
into plain Python: the same loops (downward ones included), local scalars, scalar arguments,
the macros as small helpers, the parameters in the C function's order and each kernel's
default data type (double; float for deriche; int for floyd-warshall and nussinov, whose
``base`` sequence is a char in C and an int32 here). Each function runs as ordinary Python on
NumPy arrays (the reference) and is parsed by ``pl.script`` (the kernel under test).

A C loop ``for (i = a; i < b; i++)`` is ``for i in range(a, b)``; ``i <= b`` is ``range(a, b + 1)``
and ``for (i = b; i >= a; i--)`` is ``range(b, a - 1, -1)``. ``SCALAR_VAL(x)`` is ``x``. Nothing
is added: where C would index out of bounds at some sizes (``corr[m - 1][m - 1]`` with
``m = 0``), polyloop derives the sizes the kernel needs and checks them at every call.
"""
from __future__ import annotations

import math

import numpy as np

import polyloop as pl

F = "float64"
F32 = "float32"
I = "int32"


def SQRT_FUN(x):
    return math.sqrt(x)


def EXP_FUN(x):
    return math.exp(x)


def POW_FUN(x, y):
    return math.pow(x, y)


# -- datamining ------------------------------------------------------------------------------

def correlation(m: int, n: int, float_n: float, data: pl.Buffer[("n", "m"), F],
                corr: pl.Buffer[("m", "m"), F], mean: pl.Buffer[("m",), F],
                stddev: pl.Buffer[("m",), F]):
    eps = 0.1
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i][j]
        mean[j] /= float_n
    for j in range(m):
        stddev[j] = 0.0
        for i in range(n):
            stddev[j] += (data[i][j] - mean[j]) * (data[i][j] - mean[j])
        stddev[j] /= float_n
        stddev[j] = SQRT_FUN(stddev[j])
        stddev[j] = 1.0 if stddev[j] <= eps else stddev[j]
    for i in range(n):
        for j in range(m):
            data[i][j] -= mean[j]
            data[i][j] /= SQRT_FUN(float_n) * stddev[j]
    for i in range(m - 1):
        corr[i][i] = 1.0
        for j in range(i + 1, m):
            corr[i][j] = 0.0
            for k in range(n):
                corr[i][j] += (data[k][i] * data[k][j])
            corr[j][i] = corr[i][j]
    corr[m - 1][m - 1] = 1.0


def covariance(m: int, n: int, float_n: float, data: pl.Buffer[("n", "m"), F],
               cov: pl.Buffer[("m", "m"), F], mean: pl.Buffer[("m",), F]):
    for j in range(m):
        mean[j] = 0.0
        for i in range(n):
            mean[j] += data[i][j]
        mean[j] /= float_n
    for i in range(n):
        for j in range(m):
            data[i][j] -= mean[j]
    for i in range(m):
        for j in range(i, m):
            cov[i][j] = 0.0
            for k in range(n):
                cov[i][j] += data[k][i] * data[k][j]
            cov[i][j] /= (float_n - 1.0)
            cov[j][i] = cov[i][j]


# -- linear-algebra/blas ---------------------------------------------------------------------

def gemm(ni: int, nj: int, nk: int, alpha: float, beta: float, C: pl.Buffer[("ni", "nj"), F],
         A: pl.Buffer[("ni", "nk"), F], B: pl.Buffer[("nk", "nj"), F]):
    for i in range(ni):
        for j in range(nj):
            C[i][j] *= beta
        for k in range(nk):
            for j in range(nj):
                C[i][j] += alpha * A[i][k] * B[k][j]


def gemver(n: int, alpha: float, beta: float, A: pl.Buffer[("n", "n"), F],
           u1: pl.Buffer[("n",), F], v1: pl.Buffer[("n",), F], u2: pl.Buffer[("n",), F],
           v2: pl.Buffer[("n",), F], w: pl.Buffer[("n",), F], x: pl.Buffer[("n",), F],
           y: pl.Buffer[("n",), F], z: pl.Buffer[("n",), F]):
    for i in range(n):
        for j in range(n):
            A[i][j] = A[i][j] + u1[i] * v1[j] + u2[i] * v2[j]
    for i in range(n):
        for j in range(n):
            x[i] = x[i] + beta * A[j][i] * y[j]
    for i in range(n):
        x[i] = x[i] + z[i]
    for i in range(n):
        for j in range(n):
            w[i] = w[i] + alpha * A[i][j] * x[j]


def gesummv(n: int, alpha: float, beta: float, A: pl.Buffer[("n", "n"), F],
            B: pl.Buffer[("n", "n"), F], tmp: pl.Buffer[("n",), F], x: pl.Buffer[("n",), F],
            y: pl.Buffer[("n",), F]):
    for i in range(n):
        tmp[i] = 0.0
        y[i] = 0.0
        for j in range(n):
            tmp[i] = A[i][j] * x[j] + tmp[i]
            y[i] = B[i][j] * x[j] + y[i]
        y[i] = alpha * tmp[i] + beta * y[i]


def symm(m: int, n: int, alpha: float, beta: float, C: pl.Buffer[("m", "n"), F],
         A: pl.Buffer[("m", "m"), F], B: pl.Buffer[("m", "n"), F]):
    for i in range(m):
        for j in range(n):
            temp2 = 0
            for k in range(i):
                C[k][j] += alpha * B[i][j] * A[i][k]
                temp2 += B[k][j] * A[i][k]
            C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * temp2


def syr2k(n: int, m: int, alpha: float, beta: float, C: pl.Buffer[("n", "n"), F],
          A: pl.Buffer[("n", "m"), F], B: pl.Buffer[("n", "m"), F]):
    for i in range(n):
        for j in range(i + 1):
            C[i][j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i][j] += A[j][k] * alpha * B[i][k] + B[j][k] * alpha * A[i][k]


def syrk(n: int, m: int, alpha: float, beta: float, C: pl.Buffer[("n", "n"), F],
         A: pl.Buffer[("n", "m"), F]):
    for i in range(n):
        for j in range(i + 1):
            C[i][j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i][j] += alpha * A[i][k] * A[j][k]


def trmm(m: int, n: int, alpha: float, A: pl.Buffer[("m", "m"), F],
         B: pl.Buffer[("m", "n"), F]):
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i][j] += A[k][i] * B[k][j]
            B[i][j] = alpha * B[i][j]


# -- linear-algebra/kernels ------------------------------------------------------------------

def k2mm(ni: int, nj: int, nk: int, nl: int, alpha: float, beta: float,
         tmp: pl.Buffer[("ni", "nj"), F], A: pl.Buffer[("ni", "nk"), F],
         B: pl.Buffer[("nk", "nj"), F], C: pl.Buffer[("nj", "nl"), F],
         D: pl.Buffer[("ni", "nl"), F]):
    for i in range(ni):
        for j in range(nj):
            tmp[i][j] = 0.0
            for k in range(nk):
                tmp[i][j] += alpha * A[i][k] * B[k][j]
    for i in range(ni):
        for j in range(nl):
            D[i][j] *= beta
            for k in range(nj):
                D[i][j] += tmp[i][k] * C[k][j]


def k3mm(ni: int, nj: int, nk: int, nl: int, nm: int, E: pl.Buffer[("ni", "nj"), F],
         A: pl.Buffer[("ni", "nk"), F], B: pl.Buffer[("nk", "nj"), F],
         F_: pl.Buffer[("nj", "nl"), F], C: pl.Buffer[("nj", "nm"), F],
         D: pl.Buffer[("nm", "nl"), F], G: pl.Buffer[("ni", "nl"), F]):
    for i in range(ni):
        for j in range(nj):
            E[i][j] = 0.0
            for k in range(nk):
                E[i][j] += A[i][k] * B[k][j]
    for i in range(nj):
        for j in range(nl):
            F_[i][j] = 0.0
            for k in range(nm):
                F_[i][j] += C[i][k] * D[k][j]
    for i in range(ni):
        for j in range(nl):
            G[i][j] = 0.0
            for k in range(nj):
                G[i][j] += E[i][k] * F_[k][j]


def atax(m: int, n: int, A: pl.Buffer[("m", "n"), F], x: pl.Buffer[("n",), F],
         y: pl.Buffer[("n",), F], tmp: pl.Buffer[("m",), F]):
    for i in range(n):
        y[i] = 0
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] = tmp[i] + A[i][j] * x[j]
        for j in range(n):
            y[j] = y[j] + A[i][j] * tmp[i]


def bicg(m: int, n: int, A: pl.Buffer[("n", "m"), F], s: pl.Buffer[("m",), F],
         q: pl.Buffer[("n",), F], p: pl.Buffer[("m",), F], r: pl.Buffer[("n",), F]):
    for i in range(m):
        s[i] = 0
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            s[j] = s[j] + r[i] * A[i][j]
            q[i] = q[i] + A[i][j] * p[j]


def doitgen(nr: int, nq: int, np_: int, A: pl.Buffer[("nr", "nq", "np_"), F],
            C4: pl.Buffer[("np_", "np_"), F], sum: pl.Buffer[("np_",), F]):
    for r in range(nr):
        for q in range(nq):
            for p in range(np_):
                sum[p] = 0.0
                for s in range(np_):
                    sum[p] += A[r][q][s] * C4[s][p]
            for p in range(np_):
                A[r][q][p] = sum[p]


def mvt(n: int, x1: pl.Buffer[("n",), F], x2: pl.Buffer[("n",), F], y_1: pl.Buffer[("n",), F],
        y_2: pl.Buffer[("n",), F], A: pl.Buffer[("n", "n"), F]):
    for i in range(n):
        for j in range(n):
            x1[i] = x1[i] + A[i][j] * y_1[j]
    for i in range(n):
        for j in range(n):
            x2[i] = x2[i] + A[j][i] * y_2[j]


# -- linear-algebra/solvers ------------------------------------------------------------------

def cholesky(n: int, A: pl.Buffer[("n", "n"), F]):
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[j][k]
            A[i][j] /= A[j][j]
        for k in range(i):
            A[i][i] -= A[i][k] * A[i][k]
        A[i][i] = SQRT_FUN(A[i][i])


def durbin(n: int, r: pl.Buffer[("n",), F], y: pl.Buffer[("n",), F]):
    z = np.empty((n,), F)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        sum = 0.0
        for i in range(k):
            sum += r[k - i - 1] * y[i]
        alpha = - (r[k] + sum) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha


def gramschmidt(m: int, n: int, A: pl.Buffer[("m", "n"), F], R: pl.Buffer[("n", "n"), F],
                Q: pl.Buffer[("m", "n"), F]):
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i][k] * A[i][k]
        R[k][k] = SQRT_FUN(nrm)
        for i in range(m):
            Q[i][k] = A[i][k] / R[k][k]
        for j in range(k + 1, n):
            R[k][j] = 0.0
            for i in range(m):
                R[k][j] += Q[i][k] * A[i][j]
            for i in range(m):
                A[i][j] = A[i][j] - Q[i][k] * R[k][j]


def lu(n: int, A: pl.Buffer[("n", "n"), F]):
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i][j] -= A[i][k] * A[k][j]
            A[i][j] /= A[j][j]
        for j in range(i, n):
            for k in range(i):
                A[i][j] -= A[i][k] * A[k][j]


def ludcmp(n: int, A: pl.Buffer[("n", "n"), F], b: pl.Buffer[("n",), F],
           x: pl.Buffer[("n",), F], y: pl.Buffer[("n",), F]):
    for i in range(n):
        for j in range(i):
            w = A[i][j]
            for k in range(j):
                w -= A[i][k] * A[k][j]
            A[i][j] = w / A[j][j]
        for j in range(i, n):
            w = A[i][j]
            for k in range(i):
                w -= A[i][k] * A[k][j]
            A[i][j] = w
    for i in range(n):
        w = b[i]
        for j in range(i):
            w -= A[i][j] * y[j]
        y[i] = w
    for i in range(n - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, n):
            w -= A[i][j] * x[j]
        x[i] = w / A[i][i]


def trisolv(n: int, L: pl.Buffer[("n", "n"), F], x: pl.Buffer[("n",), F],
            b: pl.Buffer[("n",), F]):
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i][j] * x[j]
        x[i] = x[i] / L[i][i]


# -- medley ----------------------------------------------------------------------------------

def deriche(w: int, h: int, alpha: np.float32, imgIn: pl.Buffer[("w", "h"), F32],
            imgOut: pl.Buffer[("w", "h"), F32], y1: pl.Buffer[("w", "h"), F32],
            y2: pl.Buffer[("w", "h"), F32]):
    k = (1.0 - EXP_FUN(-alpha)) * (1.0 - EXP_FUN(-alpha)) / (
        1.0 + 2.0 * alpha * EXP_FUN(-alpha) - EXP_FUN(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * EXP_FUN(-alpha) * (alpha - 1.0)
    a3 = a7 = k * EXP_FUN(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * EXP_FUN(-2.0 * alpha)
    b1 = POW_FUN(2.0, -alpha)
    b2 = -EXP_FUN(-2.0 * alpha)
    c1 = c2 = 1
    for i in range(w):
        ym1 = 0.0
        ym2 = 0.0
        xm1 = 0.0
        for j in range(h):
            y1[i][j] = a1 * imgIn[i][j] + a2 * xm1 + b1 * ym1 + b2 * ym2
            xm1 = imgIn[i][j]
            ym2 = ym1
            ym1 = y1[i][j]
    for i in range(w):
        yp1 = 0.0
        yp2 = 0.0
        xp1 = 0.0
        xp2 = 0.0
        for j in range(h - 1, -1, -1):
            y2[i][j] = a3 * xp1 + a4 * xp2 + b1 * yp1 + b2 * yp2
            xp2 = xp1
            xp1 = imgIn[i][j]
            yp2 = yp1
            yp1 = y2[i][j]
    for i in range(w):
        for j in range(h):
            imgOut[i][j] = c1 * (y1[i][j] + y2[i][j])
    for j in range(h):
        tm1 = 0.0
        ym1 = 0.0
        ym2 = 0.0
        for i in range(w):
            y1[i][j] = a5 * imgOut[i][j] + a6 * tm1 + b1 * ym1 + b2 * ym2
            tm1 = imgOut[i][j]
            ym2 = ym1
            ym1 = y1[i][j]
    for j in range(h):
        tp1 = 0.0
        tp2 = 0.0
        yp1 = 0.0
        yp2 = 0.0
        for i in range(w - 1, -1, -1):
            y2[i][j] = a7 * tp1 + a8 * tp2 + b1 * yp1 + b2 * yp2
            tp2 = tp1
            tp1 = imgOut[i][j]
            yp2 = yp1
            yp1 = y2[i][j]
    for i in range(w):
        for j in range(h):
            imgOut[i][j] = c2 * (y1[i][j] + y2[i][j])


def floyd_warshall(n: int, path: pl.Buffer[("n", "n"), I]):
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i][j] = path[i][j] if path[i][j] < path[i][k] + path[k][j] else \
                    path[i][k] + path[k][j]


def match(b1, b2):
    return 1 if b1 + b2 == 3 else 0


def max_score(s1, s2):
    return s1 if s1 >= s2 else s2


def nussinov(n: int, seq: pl.Buffer[("n",), I], table: pl.Buffer[("n", "n"), I]):
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i][j] = max_score(table[i][j], table[i][j - 1])
            if i + 1 < n:
                table[i][j] = max_score(table[i][j], table[i + 1][j])
            if j - 1 >= 0 and i + 1 < n:
                if i < j - 1:
                    table[i][j] = max_score(table[i][j], table[i + 1][j - 1] + match(seq[i], seq[j]))
                else:
                    table[i][j] = max_score(table[i][j], table[i + 1][j - 1])
            for k in range(i + 1, j):
                table[i][j] = max_score(table[i][j], table[i][k] + table[k + 1][j])


# -- stencils --------------------------------------------------------------------------------

def adi(tsteps: int, n: int, u: pl.Buffer[("n", "n"), F], v: pl.Buffer[("n", "n"), F],
        p: pl.Buffer[("n", "n"), F], q: pl.Buffer[("n", "n"), F]):
    DX = 1.0 / float(n)
    DY = 1.0 / float(n)
    DT = 1.0 / float(tsteps)
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for t in range(1, tsteps + 1):
        for i in range(1, n - 1):
            v[0][i] = 1.0
            p[i][0] = 0.0
            q[i][0] = v[0][i]
            for j in range(1, n - 1):
                p[i][j] = -c / (a * p[i][j - 1] + b)
                q[i][j] = (-d * u[j][i - 1] + (1.0 + 2.0 * d) * u[j][i] - f * u[j][i + 1]
                           - a * q[i][j - 1]) / (a * p[i][j - 1] + b)
            v[n - 1][i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j][i] = p[i][j] * v[j + 1][i] + q[i][j]
        for i in range(1, n - 1):
            u[i][0] = 1.0
            p[i][0] = 0.0
            q[i][0] = u[i][0]
            for j in range(1, n - 1):
                p[i][j] = -f / (d * p[i][j - 1] + e)
                q[i][j] = (-a * v[i - 1][j] + (1.0 + 2.0 * a) * v[i][j] - c * v[i + 1][j]
                           - d * q[i][j - 1]) / (d * p[i][j - 1] + e)
            u[i][n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i][j] = p[i][j] * u[i][j + 1] + q[i][j]


def fdtd_2d(tmax: int, nx: int, ny: int, ex: pl.Buffer[("nx", "ny"), F],
            ey: pl.Buffer[("nx", "ny"), F], hz: pl.Buffer[("nx", "ny"), F],
            _fict_: pl.Buffer[("tmax",), F]):
    for t in range(tmax):
        for j in range(ny):
            ey[0][j] = _fict_[t]
        for i in range(1, nx):
            for j in range(ny):
                ey[i][j] = ey[i][j] - 0.5 * (hz[i][j] - hz[i - 1][j])
        for i in range(nx):
            for j in range(1, ny):
                ex[i][j] = ex[i][j] - 0.5 * (hz[i][j] - hz[i][j - 1])
        for i in range(nx - 1):
            for j in range(ny - 1):
                hz[i][j] = hz[i][j] - 0.7 * (ex[i][j + 1] - ex[i][j] + ey[i + 1][j] - ey[i][j])


def heat_3d(tsteps: int, n: int, A: pl.Buffer[("n", "n", "n"), F],
            B: pl.Buffer[("n", "n", "n"), F]):
    for t in range(1, tsteps + 1):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    B[i][j][k] = (0.125 * (A[i + 1][j][k] - 2.0 * A[i][j][k] + A[i - 1][j][k])
                                  + 0.125 * (A[i][j + 1][k] - 2.0 * A[i][j][k] + A[i][j - 1][k])
                                  + 0.125 * (A[i][j][k + 1] - 2.0 * A[i][j][k] + A[i][j][k - 1])
                                  + A[i][j][k])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                for k in range(1, n - 1):
                    A[i][j][k] = (0.125 * (B[i + 1][j][k] - 2.0 * B[i][j][k] + B[i - 1][j][k])
                                  + 0.125 * (B[i][j + 1][k] - 2.0 * B[i][j][k] + B[i][j - 1][k])
                                  + 0.125 * (B[i][j][k + 1] - 2.0 * B[i][j][k] + B[i][j][k - 1])
                                  + B[i][j][k])


def jacobi_1d(tsteps: int, n: int, A: pl.Buffer[("n",), F], B: pl.Buffer[("n",), F]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, n - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])


def jacobi_2d(tsteps: int, n: int, A: pl.Buffer[("n", "n"), F], B: pl.Buffer[("n", "n"), F]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i][j] = 0.2 * (A[i][j] + A[i][j - 1] + A[i][1 + j] + A[1 + i][j] + A[i - 1][j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i][j] = 0.2 * (B[i][j] + B[i][j - 1] + B[i][1 + j] + B[1 + i][j] + B[i - 1][j])


def seidel_2d(tsteps: int, n: int, A: pl.Buffer[("n", "n"), F]):
    for t in range(tsteps - 1 + 1):
        for i in range(1, n - 2 + 1):
            for j in range(1, n - 2 + 1):
                A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1]
                           + A[i][j - 1] + A[i][j] + A[i][j + 1]
                           + A[i + 1][j - 1] + A[i + 1][j] + A[i + 1][j + 1]) / 9.0


KERNELS = [correlation, covariance, gemm, gemver, gesummv, symm, syr2k, syrk, trmm, k2mm, k3mm,
           atax, bicg, doitgen, mvt, cholesky, durbin, gramschmidt, lu, ludcmp, trisolv, deriche,
           floyd_warshall, nussinov, adi, fdtd_2d, heat_3d, jacobi_1d, jacobi_2d, seidel_2d]
