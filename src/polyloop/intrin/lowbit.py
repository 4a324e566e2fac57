# SPDX-License-Identifier: Apache-2.0
"""Low-bit tensor intrinsics: int8 dot products (AVX-512 VNNI ``vpdpbusd``, AMX ``tdpbusd``)
and bfloat16 dot products (AVX-512 BF16 ``vdpbf16ps``, AMX ``tdpbf16ps``), each with a portable
C body of the same meaning.

Both update a tile of ``c`` with k taken in *groups*: 4 bytes for ``u8s8``, 2 values for
``bf16``, the operands of one lane of the instruction::

    c[i, j] += sum_{g, t} int32(a[i, g, t]) * int32(b[g, j, t])      # u8s8: a uint8, b int8
    c[i, j] += sum_{g, t} float32(a[i, g, t]) * float32(b[g, j, t])  # bf16: a, b bfloat16

A matmul ``A[i, k] * B[k, j]`` matches it once k is split by the group size (``A[i, 4g + t]``
is ``a`` with strides ``(K, 4, 1)``) and B is packed so that the ``t`` of a column are
contiguous and the columns of a group follow each other: ``B[k, j]`` stored at
``(j // cols, k // 4, j % cols, k % 4)`` (``transform_layout``). ``polyloop.ops`` builds these
packings as stages of its int8 and bf16 schedules.

Which body a schedule gets is decided by the host's CPU flags (the compiler's ``-march=native``
macros, ``polyloop.util.isa``): AMX where ``__AMX_INT8__`` / ``__AMX_BF16__`` are defined,
else AVX-512 where ``__AVX512VNNI__`` / ``__AVX512BF16__`` are, else the portable loops.

The bf16 bodies add in another order than a sequential loop (pairs, then the running sum) and,
like the instructions, treat subnormal inputs as zero: results agree with float32 sums to
rounding, not bit for bit. The int8 bodies are exact (int32 arithmetic wraps as NumPy's does).

>>> u = lowbit_intrin("u8s8", "portable")
>>> u.name, u.axes, u.extents
('pl_lowbit_u8s8_portable_6x32', ('i', 'j', 'g', 't'), (None, None, None, 4))
"""
from __future__ import annotations

import functools
import re

from .. import config
from ..errors import ArgumentError, ScheduleError
from ..frontend import te
from ..schedule.intrin_registry import TensorIntrin
from ..util.isa import LOWBIT_BODIES, host_isa, lowbit_body
from . import lowbit_sources as src

PREFIX = src.PREFIX
FAMILIES = ("u8s8", "bf16")
ISAS = ("amx", "avx512", "portable")
# (rows, cols) per ISA: avx512 keeps rows * cols / 16 accumulators plus cols / 16 vectors of b
# and one broadcast in its 32 zmm registers; amx holds 16 x 16 tiles in its 8 tile registers
TILES = {"avx512": ((6, 32), (7, 32), (8, 32), (14, 32), (4, 64), (6, 64)),
         "amx": ((32, 32), (16, 16)),
         "portable": ((6, 32), (7, 32), (8, 32), (14, 32), (4, 64), (6, 64), (32, 32),
                      (16, 16))}
_TYPES = {"u8s8": ("uint8", "int8", "int32"), "bf16": ("bfloat16", "bfloat16", "float32")}


def group_size(family: str) -> int:
    """Elements of k in one group: 4 (``u8s8``) or 2 (``bf16``).

    >>> group_size("u8s8"), group_size("bf16")
    (4, 2)
    """
    _check_family(family)
    return src.FAMILIES[family].group


def host_runs(family: str, isa: str) -> bool:
    """Whether the host's CPU flags (``cc -march=native``) include what ``isa``'s body of
    ``family`` executes; the portable body runs everywhere."""
    _check_family(family)
    found = host_isa(config.CONFIG.cc)
    return all(found.has(m) for m in dict(LOWBIT_BODIES[family])[isa])


def host_kind(family: str) -> str:
    """The best body of ``family`` the host runs: ``amx``, ``avx512`` or ``portable``.

    >>> host_kind("u8s8") in ISAS
    True
    """
    _check_family(family)
    return lowbit_body(host_isa(config.CONFIG.cc), family)


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ArgumentError(f"unknown low-bit intrinsic family {family!r}; valid: "
                            f"{', '.join(FAMILIES)}")


def lowbit_description(family: str, window: bool = False) -> te.Tensor:
    """``c[i, j] += sum_{g, t} a[i, g, t] * b[g, j, t]`` widened to the accumulator type, on
    an ``m x n`` block of c (any size: a body covers it tile by tile), over ``kg`` groups of
    ``group_size(family)`` elements. ``window``: also over the ``kr x ks`` taps of a
    convolution's window, ``a[i, r, s, g, t] * b[r, s, g, j, t]`` (the tile stays in
    registers over all the taps)."""
    a_type, b_type, acc = _TYPES[family]
    group = group_size(family)
    m, n, kg = te.var("m"), te.var("n"), te.var("kg")
    g = te.reduce_axis((0, kg), name="g")
    t = te.reduce_axis((0, group), name="t")
    if not window:
        a = te.placeholder((m, kg, group), a_type, name="a")
        b = te.placeholder((kg, n, group), b_type, name="b")
        return te.compute((m, n), lambda i, j: te.sum(
            a[i, g, t].astype(acc) * b[g, j, t].astype(acc), axis=[g, t]), name="c")
    kr, ks = te.var("kr"), te.var("ks")
    aw = te.placeholder((m, kr, ks, kg, group), a_type, name="a")
    bw = te.placeholder((kr, ks, kg, n, group), b_type, name="b")
    r = te.reduce_axis((0, kr), name="r")
    s = te.reduce_axis((0, ks), name="s")
    return te.compute((m, n), lambda i, j: te.sum(
        aw[i, r, s, g, t].astype(acc) * bw[r, s, g, j, t].astype(acc), axis=[r, s, g, t]),
        name="c")


@functools.cache
def lowbit_intrin(family: str, isa: str | None = None, *, rows: int | None = None,
                  cols: int | None = None, window: bool = False) -> TensorIntrin:
    """The ``family`` dot-product tile (``"u8s8"`` or ``"bf16"``) for ``isa`` (``"amx"``,
    ``"avx512"``, ``"portable"``; None: the best the host runs). ``rows x cols`` must be one of
    ``TILES[isa]``; the default is the first (6 x 32 for avx512, 32 x 32 for amx). The
    intrinsic takes any ``m x n`` block (its extents are symbolic) and runs it tile by tile; a
    schedule splits the rows by ``rows`` and the columns by ``cols`` so that each call is one
    tile, the edges a smaller one. ``window=True``: the description also sums over the taps of
    a convolution's window (``lowbit_description``).

    >>> t = lowbit_intrin("bf16", "avx512", rows=14, cols=32)
    >>> t.name, t.operands
    ('pl_lowbit_bf16_avx512_14x32', ('c', 'a', 'b'))
    """
    _check_family(family)
    kind = host_kind(family) if isa is None else isa
    if kind not in ISAS:
        raise ArgumentError(f"unknown low-bit ISA {isa!r}; valid: {', '.join(ISAS)} or None "
                            "(the host's best)")
    default = TILES[kind][0]
    shape = (rows or default[0], cols or default[1])
    if shape not in TILES[kind]:
        raise ArgumentError(f"no {kind} {family} tile of {shape[0]} x {shape[1]}; available: "
                            f"{', '.join(f'{r}x{c}' for r, c in TILES[kind])}")
    return TensorIntrin(lowbit_description(family, window),
                        src.source(family, kind, *shape, window),
                        name=src.name(family, kind, *shape, window))


def tile_of(intrin: TensorIntrin) -> tuple[int, int]:
    """The ``rows x cols`` tile of a low-bit intrinsic (from its name).

    >>> tile_of(vnni_intrin("portable", rows=14, cols=32))
    (14, 32)
    """
    m = _NAME.match(intrin.name)
    if m is None:
        raise ArgumentError(f"{intrin.name!r} is not a low-bit intrinsic")
    return int(m["r"]), int(m["c"])


def vnni_intrin(isa: str | None = None, *, rows: int | None = None,
                cols: int | None = None) -> TensorIntrin:
    """``lowbit_intrin("u8s8", ...)``: uint8 x int8 summed in int32 (``vpdpbusd``, ``tdpbusd``).

    >>> vnni_intrin("portable").name
    'pl_lowbit_u8s8_portable_6x32'
    """
    return lowbit_intrin("u8s8", isa, rows=rows, cols=cols)


def bf16_intrin(isa: str | None = None, *, rows: int | None = None,
                cols: int | None = None) -> TensorIntrin:
    """``lowbit_intrin("bf16", ...)``: bfloat16 pairs summed in float32 (``vdpbf16ps``,
    ``tdpbf16ps``).

    >>> bf16_intrin("portable").extents
    (None, None, None, 2)
    """
    return lowbit_intrin("bf16", isa, rows=rows, cols=cols)


_NAME = re.compile(r"pl_lowbit_(?P<f>u8s8|bf16)_(?P<isa>[a-z0-9]+)_(?P<r>\d+)x(?P<c>\d+)"
                   r"(?P<w>_win)?\Z")


def builtin_lowbit(name: str) -> TensorIntrin:
    """The low-bit intrinsic called ``name`` (``Schedule.from_trace`` replays by name).

    >>> builtin_lowbit("pl_lowbit_u8s8_portable_16x16").name
    'pl_lowbit_u8s8_portable_16x16'
    """
    m = _NAME.match(name)
    if m is None:
        raise ScheduleError(f"tensorize: unknown intrinsic {name!r}: low-bit intrinsics are named "
                            f"pl_lowbit_<u8s8|bf16>_<isa>_<rows>x<cols>[_win] (isa: "
                            f"{', '.join(ISAS)})")
    try:
        return lowbit_intrin(m["f"], m["isa"], rows=int(m["r"]), cols=int(m["c"]),
                             window=m["w"] is not None)
    except ArgumentError as e:
        raise ScheduleError(f"tensorize: intrinsic {name!r} names no built-in low-bit "
                            f"kernel: {e}") from None


__all__ = ["FAMILIES", "ISAS", "PREFIX", "TILES", "bf16_intrin", "builtin_lowbit", "group_size",
           "host_kind", "host_runs", "lowbit_description", "lowbit_intrin", "tile_of",
           "vnni_intrin"]
