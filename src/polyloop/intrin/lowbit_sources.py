# SPDX-License-Identifier: Apache-2.0
"""C sources of the low-bit dot-product micro-kernels: ``u8s8`` (uint8 x int8 summed in int32)
and ``bf16`` (bfloat16 x bfloat16 summed in float32), on groups of k.

Each kernel updates a ``rows x cols`` tile ``c[i, j] += sum_{g, t} a[i, g, t] * b[g, j, t]``,
where a group ``t`` holds 4 bytes of k (``u8s8``, the operands of ``vpdpbusd``) or 2 bfloat16
values (``bf16``, the operands of ``vdpbf16ps``). The call is the one of ``pl.TensorIntrin``::

    name(c, a, b, ldc, lda_i, lda_g, ldb_g, ldb_j, m, n, kg)

(element strides; the elements of a group are contiguous) for any ``m x n`` block of c: the
tile is the most a body holds at once (``rows x cols``), a schedule calls it on blocks of at
most that size, edges included. Bodies:

* ``avx512``: the tile in ``rows * cols / 16`` zmm registers; per group, ``cols / 16`` loads
  of ``b`` (16 columns of one group each: ``ldb_j`` must be the group size, which the packed
  panels of the schedules give; other strides run the portable loops), one broadcast of a
  group of ``a`` per row, and one ``vpdpbusd`` / ``vdpbf16ps`` per accumulator. A block of
  fewer rows runs a copy made for that many rows; fewer columns mask the last vectors (no
  element past ``n`` is read or written).
* ``amx``: 16 x 16 tiles of ``c`` in AMX tile registers (2 x 2 of them for a 32 x 32 tile),
  16 groups (64 bytes) of k per ``tdpbusd`` / ``tdpbf16ps``; smaller blocks, groups beyond a
  multiple of 16 and operands that are not contiguous along the groups run the AVX-512 body.
* ``portable``: plain loops, the reference the others agree with.

The x86 bodies carry ``target`` attributes, so they compile with any x86 ``-march``; the
intrinsic that a schedule calls is chosen by the host's CPU flags (``polyloop.intrin.lowbit``).

>>> print(source("u8s8", "portable", 2, 4).splitlines()[4][:73])
static __attribute__((noinline)) void pl_lowbit_u8s8_portable_2x4(int32_t
"""
from __future__ import annotations

from dataclasses import dataclass

PREFIX = "pl_lowbit_"


@dataclass(frozen=True, slots=True)
class Family:
    """What one kind of low-bit dot product needs spelled in C."""
    group: int            # elements of k per group (4 bytes either way)
    c_type: str
    a_type: str
    b_type: str
    widen_a: str          # C expression of one element of a as the accumulator's type
    widen_b: str
    acc_vector: str       # the zmm type of an accumulator
    load_c: str
    store_c: str
    operand: str          # cast of a 512-bit integer vector to the instruction's operand type
    dot: str              # the AVX-512 instruction: acc = dot(acc, a, b)
    avx512_target: str
    amx_dot: str
    amx_target: str


FAMILIES = {
    "u8s8": Family(4, "int32_t", "uint8_t", "int8_t", "(int32_t){x}", "(int32_t){x}",
                   "__m512i", "_mm512_loadu_si512", "_mm512_storeu_si512", "",
                   "_mm512_dpbusd_epi32", "avx512f,avx512vnni", "_tile_dpbusd",
                   "amx-tile,amx-int8"),
    "bf16": Family(2, "float", "uint16_t", "uint16_t", "pl_lowbit_bf16_f32({x})",
                   "pl_lowbit_bf16_f32({x})", "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps",
                   "(__m512bh)", "_mm512_dpbf16_ps", "avx512f,avx512bf16", "_tile_dpbf16ps",
                   "amx-tile,amx-bf16"),
}

_BF16_WIDEN = """#ifndef PL_LOWBIT_BF16_F32
#define PL_LOWBIT_BF16_F32
static inline float pl_lowbit_bf16_f32(uint16_t h) {
    union { uint32_t u; float f; } v = { (uint32_t)h << 16 };
    return v.f;
}
#endif"""


def name(family: str, isa: str, rows: int, cols: int, window: bool = False) -> str:
    """``pl_lowbit_<family>_<isa>_<rows>x<cols>`` (``_win``: the window variant)."""
    return f"{PREFIX}{family}_{isa}_{rows}x{cols}" + ("_win" if window else "")


# the stride parameters: a plain tile (a[i, g, t], b[g, j, t]) and a window tile (a[i, r, s,
# g, t], b[r, s, g, j, t]: a convolution's taps summed in the call)
_STRIDES = {False: ("lda_i", "lda_g", "ldb_g", "ldb_j"),
            True: ("lda_i", "lda_r", "lda_s", "lda_g", "ldb_r", "ldb_s", "ldb_g", "ldb_j")}
_COUNTS = {False: ("kg",), True: ("kr", "ks", "kg")}


def _head(family: str, isa: str, rows: int, cols: int, window: bool, attribute: str = "",
          suffix: str = "", sizes: tuple[str, ...] = ("m", "n")) -> str:
    """The function's first line. The entry points are never inlined: a schedule calls one
    from several copies of a nest (full and partial tiles), and one copy of the unrolled
    tiles is enough (a call costs nothing next to a tile's work); the row kernels a dispatcher
    calls are inlined into it."""
    f = FAMILIES[family]
    params = ", ".join(f"int64_t {p}" for p in ("ldc", *_STRIDES[window], *sizes,
                                               *_COUNTS[window]))
    linkage = "static inline " if suffix else "static __attribute__((noinline)) "
    return (f"{linkage}{attribute}void {name(family, isa, rows, cols, window)}{suffix}("
            f"{f.c_type} *restrict c, const {f.a_type} *restrict a, const {f.b_type} *restrict b, "
            f"{params}) {{")


def _taps(window: bool) -> tuple[list[str], list[str], str, str]:
    """The loops over a window's taps (none for a plain tile), their closing braces, and the
    offsets of a tap in a and b."""
    if not window:
        return [], [], "", ""
    return (["    for (int64_t r = 0; r < kr; r++)", "    for (int64_t s = 0; s < ks; s++) {"],
            ["    }"], " + r * lda_r + s * lda_s", " + r * ldb_r + s * ldb_s")


def _loops(family: str, window: bool, first_group: str = "0") -> list[str]:
    """The ``m x n`` sums as plain loops over the groups ``first_group`` .. ``kg - 1``."""
    f = FAMILIES[family]
    _, _, at, bt = _taps(window)
    a = f.widen_a.format(x=f"a[i * lda_i{at} + g * lda_g + t]")
    b = f.widen_b.format(x=f"b[g * ldb_g{bt} + j * ldb_j + t]")
    taps = ["for (int64_t r = 0; r < kr; r++)", "for (int64_t s = 0; s < ks; s++)"] \
        if window else []
    inner = [f"for (int64_t g = {first_group}; g < kg; g++)",
             f"for (int64_t t = 0; t < {f.group}; t++) acc += {a} * {b};"]
    body = [" " * (12 + 4 * d) + line for d, line in enumerate(taps + inner)]
    return ["    for (int64_t i = 0; i < m; i++)",
            "        for (int64_t j = 0; j < n; j++) {",
            f"            {f.c_type} acc = c[i * ldc + j];", *body,
            "            c[i * ldc + j] = acc;",
            "        }"]


def _prelude(family: str, *includes: str) -> list[str]:
    lines = ["#include <stdint.h>", "#include <string.h>", *includes]
    return lines + ([_BF16_WIDEN] if family == "bf16" else [])


def portable_source(family: str, rows: int, cols: int, window: bool = False) -> str:
    """Plain C loops: the same sums on any CPU."""
    return "\n".join(_prelude(family) + [_head(family, "portable", rows, cols, window)]
                      + _loops(family, window) + ["}"])


def _avx512_rows(family: str, rows: int, cols: int, r: int, attribute: str,
                 window: bool) -> list[str]:
    """The kernel for ``r`` rows (of at most ``rows``) and ``n <= cols`` columns: the last
    vectors of a row are masked (loads and stores of c and b), so nothing past column ``n``
    is read or written. A window kernel keeps the tile in registers over all the taps."""
    f = FAMILIES[family]
    nv = cols // 16
    lines = [_head(family, "avx512", rows, cols, window, attribute, f"_rows{r}", ("n",))]
    for q in range(nv):
        lines.append(f"    const __mmask16 k{q} = n >= {16 * (q + 1)} ? (__mmask16)0xFFFF : n <= "
                     f"{16 * q} ? (__mmask16)0 : (__mmask16)((1u << (n - {16 * q})) - 1u);")
    load = "_mm512_maskz_loadu_epi32" if family == "u8s8" else "_mm512_maskz_loadu_ps"
    store = "_mm512_mask_storeu_epi32" if family == "u8s8" else "_mm512_mask_storeu_ps"
    for i in range(r):
        decl = ", ".join(f"c{i}_{q} = {load}(k{q}, c + {i} * ldc + {16 * q})" for q in range(nv))
        lines.append(f"    {f.acc_vector} {decl};")
    open_taps, close_taps, at, bt = _taps(window)
    lines += open_taps
    lines += ["    #pragma GCC unroll 4", "    for (int64_t g = 0; g < kg; g++) {"]
    for q in range(nv):
        lines.append(f"        const __m512i b{q} = _mm512_maskz_loadu_epi32(k{q}, b{bt} + "
                     f"g * ldb_g + {16 * f.group * q});")
    for i in range(r):
        lines += ["        {",
                  "            int32_t v;",
                  f"            memcpy(&v, a + {i} * lda_i{at} + g * lda_g, 4);",
                  "            const __m512i ar = _mm512_set1_epi32(v);"]
        for q in range(nv):
            acc = f"c{i}_{q}"
            lines.append(f"            {acc} = {f.dot}({acc}, {f.operand}ar, {f.operand}b{q});")
        lines.append("        }")
    lines.append("    }")
    lines += close_taps
    for i in range(r):
        for q in range(nv):
            lines.append(f"    {store}(c + {i} * ldc + {16 * q}, k{q}, c{i}_{q});")
    lines.append("}")
    return lines


def avx512_source(family: str, rows: int, cols: int, window: bool = False) -> str:
    """A register tile of AVX-512 VNNI (``u8s8``) or AVX-512 BF16 (``bf16``) dot products for
    up to ``rows x cols`` elements of c; larger ``m x n`` are covered tile by tile."""
    f = FAMILIES[family]
    if cols % 16:
        raise ValueError(f"avx512 {family} tile width {cols} is not a multiple of 16")
    attribute = f'__attribute__((target("{f.avx512_target}"))) '
    lines = _prelude(family, "#include <immintrin.h>")
    for r in range(1, rows + 1):
        lines += _avx512_rows(family, rows, cols, r, attribute, window)
    base = name(family, "avx512", rows, cols, window)
    args = ", ".join(("ldc", *_STRIDES[window], "nr", *_COUNTS[window]))
    lines += [_head(family, "avx512", rows, cols, window, attribute),
              f"    if (ldb_j != {f.group}) {{  /* the columns of a group are not contiguous */"]
    lines += ["    " + x for x in _loops(family, window)]
    lines += ["        return;", "    }",
              f"    for (int64_t i0 = 0; i0 < m; i0 += {rows})",
              f"        for (int64_t j0 = 0; j0 < n; j0 += {cols}) {{",
              f"            const int64_t nr = n - j0 < {cols} ? n - j0 : {cols};",
              f"            {f.c_type} *ct = c + i0 * ldc + j0;",
              f"            const {f.a_type} *at = a + i0 * lda_i;",
              f"            const {f.b_type} *bt = b + j0 * ldb_j;",
              f"            switch (m - i0 < {rows} ? m - i0 : {rows}) {{"]
    for r in range(rows, 0, -1):
        lines.append(f"            case {r}: {base}_rows{r}(ct, at, bt, {args}); break;")
    lines += ["            }", "        }", "}"]
    return "\n".join(lines)


_AMX_SETUP = """#ifndef PL_LOWBIT_AMX_SETUP
#define PL_LOWBIT_AMX_SETUP
/* Linux hands out the AMX tile state only to a process that asks for it (arch_prctl
   ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); asked once, the answer holds for every thread */
static int pl_lowbit_amx_permitted(void) {
    static int state = 0;
    int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        s = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
        __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} pl_lowbit_amx_config;
#endif"""


def amx_source(family: str, rows: int, cols: int, window: bool = False) -> str:
    """AMX tiles: a full ``rows x cols`` block of c as (rows / 16) x (cols / 16) tiles of
    16 x 16, with one tile of a per 16 rows and one of b per 16 columns (8 tile registers at
    most), 16 groups of k per step. Smaller blocks, the groups past a multiple of 16 and
    operands that are not contiguous along the groups run the AVX-512 kernel (every CPU with
    AMX has AVX-512 VNNI and BF16)."""
    f = FAMILIES[family]
    if window:
        return _amx_window(family, rows, cols)
    if rows % 16 or cols % 16 or (rows // 16) * (cols // 16) + rows // 16 + cols // 16 > 8:
        raise ValueError(f"amx {family} tile {rows} x {cols}: 16 x 16 tiles of c plus one of a "
                         "per 16 rows and one of b per 16 columns must fit in 8 tile registers")
    mr, nr = rows // 16, cols // 16
    ctile = {(r, q): r * nr + q for r in range(mr) for q in range(nr)}
    atile = {r: mr * nr + r for r in range(mr)}
    btile = {q: mr * nr + mr + q for q in range(nr)}
    eb = 1 if family == "u8s8" else 2                         # bytes per element of a and b
    attribute = f'__attribute__((target("{f.amx_target},{f.avx512_target}"))) '
    rest = name(family, "avx512", *AMX_REST)
    lines = [source(family, "avx512", *AMX_REST), "#include <unistd.h>",
             "#include <sys/syscall.h>", _AMX_SETUP]
    lines += [_head(family, "amx", rows, cols, False, attribute),
              "    int64_t done = 0;   /* groups summed on the tiles */",
              f"    if (m == {rows} && n == {cols} && lda_g == {f.group} && ldb_j == {f.group} "
              "&& kg >= 16 && pl_lowbit_amx_permitted()) {",
              "        pl_lowbit_amx_config cfg;",
              "        memset(&cfg, 0, sizeof cfg);",
              "        cfg.palette = 1;",
              f"        for (int t = 0; t < {len(ctile) + mr + nr}; t++) {{ cfg.colsb[t] = 64; "
              "cfg.rows[t] = 16; }",
              "        _tile_loadconfig(&cfg);"]
    for (r, q), t in ctile.items():
        lines.append(f"        _tile_loadd({t}, c + {16 * r} * ldc + {16 * q}, ldc * 4);")
    lines.append("        for (; done + 16 <= kg; done += 16) {")
    for r, t in atile.items():
        lines.append(f"            _tile_loadd({t}, a + {16 * r} * lda_i + done * lda_g, "
                     f"lda_i * {eb});")
    for q, t in btile.items():
        lines.append(f"            _tile_loadd({t}, b + done * ldb_g + {16 * q} * ldb_j, "
                     f"ldb_g * {eb});")
    for (r, q), t in ctile.items():
        lines.append(f"            {f.amx_dot}({t}, {atile[r]}, {btile[q]});")
    lines.append("        }")
    for (r, q), t in ctile.items():
        lines.append(f"        _tile_stored({t}, c + {16 * r} * ldc + {16 * q}, ldc * 4);")
    lines += ["        _tile_release();", "    }",
              "    if (done < kg)",
              f"        {rest}(c, a + done * lda_g, b + done * ldb_g, ldc, lda_i, lda_g, ldb_g, "
              "ldb_j, m, n, kg - done);", "}"]
    return "\n".join(lines)


# the AVX-512 tile that sums what the AMX tiles do not
AMX_REST = (6, 32)


def _amx_window(family: str, rows: int, cols: int) -> str:
    """The window variant of an AMX body: the plain body once per tap (c through memory)."""
    f = FAMILIES[family]
    attribute = f'__attribute__((target("{f.amx_target},{f.avx512_target}"))) '
    plain = name(family, "amx", rows, cols)
    return "\n".join([source(family, "amx", rows, cols),
                      _head(family, "amx", rows, cols, True, attribute),
                      "    for (int64_t r = 0; r < kr; r++)",
                      "        for (int64_t s = 0; s < ks; s++)",
                      f"            {plain}(c, a + r * lda_r + s * lda_s, b + r * ldb_r + s * "
                      "ldb_s, ldc, lda_i, lda_g, ldb_g, ldb_j, m, n, kg);",
                      "}"])

_SOURCES = {"avx512": avx512_source, "amx": amx_source, "portable": portable_source}


def source(family: str, isa: str, rows: int, cols: int, window: bool = False) -> str:
    """The C source of the ``family`` kernel for ``isa`` on a ``rows x cols`` tile (guarded:
    a program may hold it twice, an AMX body includes its AVX-512 one)."""
    guard = name(family, isa, rows, cols, window).upper() + "_DEFINED"
    return "\n".join([f"#ifndef {guard}", f"#define {guard}",
                      _SOURCES[isa](family, rows, cols, window), "#endif"])
