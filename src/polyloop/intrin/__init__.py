# SPDX-License-Identifier: Apache-2.0
"""Built-in tensor intrinsics for ``Schedule.tensorize``: matmul register tiles and a dot
product, for AVX-512, AVX2 (FMA) and portable C; ``isa=None`` picks what the host supports.

>>> from polyloop.intrin import gemm_intrin
>>> g = gemm_intrin("portable")
>>> g.axes, g.extents
(('i', 'j', 'k'), (6, 16, None))
"""
from __future__ import annotations

import functools
import re

from .. import config
from ..errors import ArgumentError, ScheduleError
from ..frontend import te
from ..schedule.intrin_registry import BUILTIN_PREFIX, TensorIntrin, register_factory
from ..util.isa import host_isa
from . import sources, tensorcore
from .tensorcore import wmma_intrin

# (rows, cols) each ISA supports: cols is a whole number of vectors, and rows * cols / lanes
# accumulators plus the B vectors and one broadcast fit in the register file
TILES = {"avx512": ((6, 32), (14, 32), (8, 32), (4, 64)),
         "avx2": ((6, 16), (4, 24)),
         "portable": ((6, 16), (4, 8), (6, 32), (14, 32))}
ISAS = tuple(TILES)
# the compiler macros each family's C needs; a target without them gets the portable kernel
REQUIRES = {"avx512": ("__AVX512F__",), "avx2": ("__AVX2__", "__FMA__"), "portable": ()}


def host_kind() -> str:
    """``avx512``, ``avx2`` or ``portable``: the best micro-kernel family the host runs."""
    isa = host_isa(config.CONFIG.cc)
    if isa.name == "avx512":
        return "avx512"
    if isa.name == "avx2" and isa.fma:
        return "avx2"
    return "portable"


def _isa(isa: str | None) -> str:
    kind = host_kind() if isa is None else isa
    if kind not in ISAS:
        raise ArgumentError(f"unknown micro-kernel ISA {isa!r}; valid: {', '.join(ISAS)} or None "
                            "(the host's)")
    return kind


def gemm_description(rows: int, cols: int, packed_a: bool = False) -> te.Tensor:
    """``c[i, j] += sum_k a[i, k] * b[k, j]`` over a rows x cols tile and ``kc`` steps of k
    (``a[k, i]`` with ``packed_a``: A stored in panels, contiguous along the rows)."""
    kc = te.var("kc")
    a = te.placeholder((kc, rows) if packed_a else (rows, kc), "float32", name="a")
    b = te.placeholder((kc, cols), "float32", name="b")
    k = te.reduce_axis((0, kc), name="k")
    if packed_a:
        return te.compute((rows, cols), lambda i, j: te.sum(a[k, i] * b[k, j], axis=k), name="c")
    return te.compute((rows, cols), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")


@functools.cache
def gemm_intrin(isa: str | None = None, *, rows: int | None = None, cols: int | None = None,
                packed_a: bool = False) -> TensorIntrin:
    """A register-tile matmul update ``C[i, j] += A[i, k] * B[k, j]`` (rows x cols, any k).

    ``isa``: ``"avx512"`` (6 x 32 by default, also 14 x 32: broadcast A, two zmm of B, 12 or
    28 zmm accumulators), ``"avx2"`` (6 x 16), ``"portable"`` (plain C), or None for the best
    the host runs. The nest to tensorize must give B (and C) contiguous columns; the fastest
    layout packs B into panels of ``cols`` columns with ``transform_layout``. With
    ``packed_a=True`` the description reads ``a[k, i]``: pack A into panels of ``rows`` rows.

    >>> g = gemm_intrin("avx2")
    >>> g.name, g.extents
    ('pl_ukr_gemm_avx2_6x16', (6, 16, None))
    """
    kind = _isa(isa)
    default = TILES[kind][0]
    shape = (rows or default[0], cols or default[1])
    if shape not in TILES[kind]:
        raise ArgumentError(f"no {kind} gemm micro-kernel of {shape[0]} x {shape[1]}; "
                            f"available: {', '.join(f'{r}x{c}' for r, c in TILES[kind])}")
    return _gemm(kind, *shape, packed_a=packed_a,
                 fallback=None if kind == "portable" else _gemm("portable", *shape,
                                                                packed_a=packed_a))


def _gemm(kind: str, rows: int, cols: int, *, packed_a: bool,
          fallback: TensorIntrin | None = None) -> TensorIntrin:
    """The ``kind`` gemm kernel of that shape (the portable one has any shape)."""
    return TensorIntrin(gemm_description(rows, cols, packed_a=packed_a),
                        sources.gemm_source(kind, rows, cols, packed_a=packed_a),
                        name=sources.gemm_name(kind, rows, cols, packed_a=packed_a),
                        requires=REQUIRES[kind], fallback=fallback)


def dot_description() -> te.Tensor:
    """``d[] += sum_k x[k] * y[k]`` over ``kc`` elements."""
    kc = te.var("kc")
    x = te.placeholder((kc,), "float32", name="x")
    y = te.placeholder((kc,), "float32", name="y")
    k = te.reduce_axis((0, kc), name="k")
    return te.compute((), lambda: te.sum(x[k] * y[k], axis=k), name="d")


@functools.cache
def dot_intrin(isa: str | None = None) -> TensorIntrin:
    """A dot-product reduction ``d += sum_k x[k] * y[k]`` (x and y contiguous, any length):
    tensorize the reduction loop of a matrix-vector product or a row sum of products. It adds
    in partial sums, so the result may round differently from a sequential loop.

    >>> dot_intrin("portable").axes
    ('k',)
    """
    kind = _isa(isa)
    return TensorIntrin(dot_description(), sources.dot_source(kind), name=sources.dot_name(kind),
                        requires=REQUIRES[kind],
                        fallback=None if kind == "portable" else dot_intrin("portable"))


_GEMM_NAME = re.compile(r"pl_ukr_gemm_(?P<isa>[a-z0-9]+)_(?P<rows>\d+)x(?P<cols>\d+)(?P<pa>_pa)?\Z")
_DOT_NAME = re.compile(r"pl_ukr_dot_(?P<isa>[a-z0-9]+)\Z")


def builtin(name: str) -> TensorIntrin:
    """The built-in micro-kernel called ``name``, rebuilt from the parameters its name encodes
    (``Schedule.from_trace`` replays a ``tensorize`` step by the intrinsic's name).

    >>> builtin("pl_ukr_gemm_portable_4x8").extents
    (4, 8, None)
    """
    m = _GEMM_NAME.match(name)
    try:
        if m is not None:
            return gemm_intrin(m["isa"], rows=int(m["rows"]), cols=int(m["cols"]),
                               packed_a=m["pa"] is not None)
        m = _DOT_NAME.match(name)
        if m is not None:
            return dot_intrin(m["isa"])
    except ArgumentError as e:
        raise ScheduleError(f"tensorize: intrinsic {name!r} names no built-in micro-kernel: "
                            f"{e}") from None
    raise ScheduleError(f"tensorize: unknown intrinsic {name!r}: built-in micro-kernels are "
                        "named pl_ukr_gemm_<isa>_<rows>x<cols>[_pa] or pl_ukr_dot_<isa> "
                        f"(isa: {', '.join(ISAS)})")


register_factory(BUILTIN_PREFIX, builtin)
register_factory(tensorcore.PREFIX, tensorcore.builtin_wmma)

__all__ = ["ISAS", "TILES", "builtin", "dot_intrin", "gemm_intrin", "host_kind", "wmma_intrin"]
