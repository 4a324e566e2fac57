# SPDX-License-Identifier: Apache-2.0
"""The space's rule for low-bit products: a block ``C[i, j] += acc(A[i, k]) * acc(B[k, j])``
with uint8 ``A``, int8 ``B`` and int32 ``C`` (or bfloat16 ``A`` and ``B``, float32 ``C``) is
tensorized with a dot-product tile of the host (``polyloop.intrin.lowbit``: AVX-512 VNNI /
BF16, AMX, portable): k split into groups, B packed into panels of the tile's width
(``transform_layout``), the tile (one of the host body's ``TILES``) and the panels kept in L2
per block (``panels``) drawn; B's packing is made by the thread that owns the block of panels
or first, whole (drawn).

>>> import polyloop as pl
>>> from polyloop.tune.rules import block_shape
>>> A = pl.placeholder((16, 32), "uint8", name="A"); B = pl.placeholder((32, 64), "int8", name="B")
>>> k = pl.reduce_axis((0, 32), name="k")
>>> C = pl.compute((16, 64), lambda i, j: pl.sum(A[i, k].astype("int32")
...                                              * B[k, j].astype("int32"), axis=k), name="C")
>>> sch = pl.Schedule(C)
>>> lowbit_family(sch, block_shape(sch, "C"))
'u8s8'
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..intrin.lowbit import TILES, group_size, host_kind, lowbit_intrin
from ..ir.expr import BinOp, BinOpKind, Cast, Const, Load
from ..ops.lowbit_tile import tile_product
from ..schedule import Schedule
from .rules import BlockShape

PANELS = (1, 2, 4, 8, 16)
# (A, B, C) dtypes of each family's description
_TYPES = {("uint8", "int8", "int32"): "u8s8", ("bfloat16", "bfloat16", "float32"): "bf16"}


def lowbit_family(sch: Schedule, shape: BlockShape) -> str | None:
    """``"u8s8"`` or ``"bf16"`` when the block is a widening product of constant sizes whose k
    is whole groups (and that holds a row of tiles), else None."""
    if len(shape.spatial) != 2 or len(shape.reduction) != 1 or len(shape.reads) != 2:
        return None
    (i, j), (k,) = shape.spatial, shape.reduction
    if [r[1] for r in shape.reads] != [(i, k), (k, j)]:
        return None
    stmt = [s for s in sch.program.statements if s.block_name == shape.name and not s.is_init][-1]
    v = stmt.value
    if not (isinstance(v, BinOp) and v.op is BinOpKind.MUL and isinstance(v.lhs, Cast)
            and isinstance(v.rhs, Cast) and isinstance(v.lhs.value, Load)
            and isinstance(v.rhs.value, Load)):
        return None
    family = _TYPES.get((str(v.lhs.value.dtype), str(v.rhs.value.dtype), shape.dtype))
    if family is None:
        return None
    buf = sch.program.buffer(shape.reads[0][0])
    dims = [*sch.program.buffer(shape.name).shape, buf.shape[1]]
    if not all(isinstance(d, Const) for d in dims) or dims[2].value % group_size(family):
        return None
    return family


def lowbit_tile(sch: Schedule, shape: BlockShape, family: str) -> None:
    """Tensorize the block with a drawn tile of the host's ``family`` body (see the module
    docstring)."""
    kind = host_kind(family)
    rows, cols = TILES[kind][sch.sample_categorical(list(range(len(TILES[kind]))))]
    panels = sch.sample_categorical(list(PANELS))
    pack_by_owner = sch.sample_categorical([True, False])
    b = shape.reads[1][0]
    tile_product(sch, lowbit_intrin(family, kind, rows=rows, cols=cols), epilogue=None,
                 parallel=True, block=shape.name, packed=b, panels=int(panels),
                 group=group_size(family))
    if pack_by_owner:
        try:
            sch.compute_at(f"{b}_packed_in", sch.get_loops(shape.name)[0])
        except ScheduleError:
            pass    # the panels are read outside the block's loops: packed whole, first
