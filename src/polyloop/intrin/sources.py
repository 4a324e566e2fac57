# SPDX-License-Identifier: Apache-2.0
"""C sources of the built-in micro-kernels, written out register by register.

Each gemm kernel keeps a ``rows x cols`` tile of C in vector registers for the whole loop over
k: per step it loads ``cols / lanes`` vectors of B, broadcasts one element of A per row and
issues ``rows * cols / lanes`` fused multiply-adds. The calling convention is the one of
``pl.TensorIntrin``: ``(c, a, b, ldc, lda, ldb, kc)``.

>>> print(gemm_source("portable", 2, 4).splitlines()[0])
static inline void pl_ukr_gemm_portable_2x4(float *restrict c, const float *restrict a, const float *restrict b, int64_t ldc, int64_t lda, int64_t ldb, int64_t kc) {
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VectorSpelling:
    """How one ISA spells the few vector operations a register tile needs."""
    lanes: int
    vtype: str
    load: str
    store: str
    broadcast: str
    fma: str


SPELLINGS = {
    "avx512": VectorSpelling(16, "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
                             "_mm512_set1_ps", "_mm512_fmadd_ps"),
    "avx2": VectorSpelling(8, "__m256", "_mm256_loadu_ps", "_mm256_storeu_ps",
                           "_mm256_set1_ps", "_mm256_fmadd_ps"),
}

GEMM_PARAMS = ("float *restrict c, const float *restrict a, const float *restrict b, "
               "int64_t ldc, int64_t lda, int64_t ldb, int64_t kc")


def gemm_name(isa: str, rows: int, cols: int, packed_a: bool = False) -> str:
    return f"pl_ukr_gemm_{isa}_{rows}x{cols}" + ("_pa" if packed_a else "")


def gemm_source(isa: str, rows: int, cols: int, packed_a: bool = False) -> str:
    """C source of ``c[i, j] += sum_k a[i, k] * b[k, j]`` on a rows x cols tile. With
    ``packed_a`` the A operand is read as ``a[k, i]`` (A packed in panels of ``rows`` rows)."""
    name = gemm_name(isa, rows, cols, packed_a)
    a_elem = (lambda r: f"a[k * lda + {r}]") if packed_a else (lambda r: f"a[{r} * lda + k]")
    head = f"static inline void {name}({GEMM_PARAMS}) {{"
    if isa == "portable":
        return "\n".join([
            head,
            f"    float acc[{rows}][{cols}];",
            f"    for (int i = 0; i < {rows}; i++)",
            f"        for (int j = 0; j < {cols}; j++) acc[i][j] = c[i * ldc + j];",
            "    for (int64_t k = 0; k < kc; k++) {",
            f"        for (int i = 0; i < {rows}; i++) {{",
            f"            const float ai = {a_elem('i')};",
            f"            for (int j = 0; j < {cols}; j++) acc[i][j] += ai * b[k * ldb + j];",
            "        }",
            "    }",
            f"    for (int i = 0; i < {rows}; i++)",
            f"        for (int j = 0; j < {cols}; j++) c[i * ldc + j] = acc[i][j];",
            "}"])
    v = SPELLINGS[isa]
    if cols % v.lanes:
        raise ValueError(f"{isa} tile width {cols} is not a multiple of {v.lanes}")
    nv = cols // v.lanes
    lines = ["#include <immintrin.h>", head]
    for r in range(rows):
        decl = ", ".join(f"c{r}_{q} = {v.load}(c + {r} * ldc + {q * v.lanes})" for q in range(nv))
        lines.append(f"    {v.vtype} {decl};")
    lines += ["    #pragma GCC unroll 4", "    for (int64_t k = 0; k < kc; k++) {"]
    for q in range(nv):
        lines.append(f"        const {v.vtype} b{q} = {v.load}(b + k * ldb + {q * v.lanes});")
    for r in range(rows):
        lines.append(f"        const {v.vtype} a{r} = {v.broadcast}({a_elem(r)});")
        for q in range(nv):
            lines.append(f"        c{r}_{q} = {v.fma}(a{r}, b{q}, c{r}_{q});")
    lines.append("    }")
    for r in range(rows):
        for q in range(nv):
            lines.append(f"    {v.store}(c + {r} * ldc + {q * v.lanes}, c{r}_{q});")
    lines.append("}")
    return "\n".join(lines)


def dot_name(isa: str) -> str:
    return f"pl_ukr_dot_{isa}"


def dot_source(isa: str) -> str:
    """C source of ``d[0] += sum_k x[k] * y[k]`` (partial sums: the order of the additions
    differs from a sequential loop)."""
    head = (f"static inline void {dot_name(isa)}(float *restrict d, const float *restrict x, "
            "const float *restrict y, int64_t kc) {")
    if isa == "avx512":
        return "\n".join([
            "#include <immintrin.h>", head,
            "    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();",
            "    int64_t k = 0;",
            "    for (; k + 32 <= kc; k += 32) {",
            "        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(y + k), s0);",
            "        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(y + k + 16), s1);",
            "    }",
            "    for (; k < kc; k += 16) {",
            "        const __mmask16 m = kc - k >= 16 ? (__mmask16)0xFFFF",
            "                                         : (__mmask16)((1u << (kc - k)) - 1u);",
            "        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + k),",
            "                             _mm512_maskz_loadu_ps(m, y + k), s0);",
            "    }",
            "    d[0] += _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));",
            "}"])
    if isa == "avx2":
        return "\n".join([
            "#include <immintrin.h>", head,
            "    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();",
            "    int64_t k = 0;",
            "    for (; k + 16 <= kc; k += 16) {",
            "        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k), s0);",
            "        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), _mm256_loadu_ps(y + k + 8), s1);",
            "    }",
            "    __m256 s = _mm256_add_ps(s0, s1);",
            "    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));",
            "    h = _mm_add_ps(h, _mm_movehl_ps(h, h));",
            "    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));",
            "    float total = _mm_cvtss_f32(h);",
            "    for (; k < kc; k++) total += x[k] * y[k];",
            "    d[0] += total;",
            "}"])
    return "\n".join([
        head,
        "    float part[8] = {0};",
        "    int64_t k = 0;",
        "    for (; k + 8 <= kc; k += 8)",
        "        for (int q = 0; q < 8; q++) part[q] += x[k + q] * y[k + q];",
        "    float total = 0.0f;",
        "    for (int q = 0; q < 8; q++) total += part[q];",
        "    for (; k < kc; k++) total += x[k] * y[k];",
        "    d[0] += total;",
        "}"])
