# SPDX-License-Identifier: Apache-2.0
"""A GPU matmul on tensor cores: ``c = a @ b`` with float16 or bfloat16 ``a``, ``b`` and float32
``c``, accumulated in float32, through ``tensorize`` with the built-in tensor-core intrinsic
(``polyloop.intrin.wmma_intrin``: 16 x 16 x 16 fragments in CUDA, plain loops in OpenCL).

A block of 2 x 2 warps (threadIdx.z, threadIdx.y; threadIdx.x is the lane) computes a 64 x 64
tile of ``c`` in shared memory; each warp owns 32 x 32 of it, 2 x 2 fragment tiles. For each
32-deep step of k the block copies a 64 x 32 tile of ``a`` and a 32 x 64 tile of ``b`` into
shared memory (all 128 threads; the exact dependence analysis places the barriers), then each
warp calls the intrinsic on its four tiles. The tile of ``c`` is zeroed and copied out by the
32 lanes of each warp, one row of its 32 columns at a time. Sizes that 16 does not divide are
exact: a tile that runs over the edge of ``c`` (isl writes its bounds) runs the loops instead
of the call, and the last step of k passes its shorter depth to the call.

>>> from polyloop import ops
>>> sch = ops.matmul_tensorcore(64, 64, 32, dtype="bfloat16")
>>> "pl_wmma_bf16_16x16x16" in str(sch)
True
"""
from __future__ import annotations

from ..errors import ArgumentError
from ..frontend.kernel import ArrayArg, make_kernel
from ..schedule.kernel import (add_prefetch, fix_parameters, schedule_of,
                               set_temporary_address_space, split_iname, tag_inames)
from ..schedule.schedule import Schedule
from ..schedule.trace import LoopHandle

BLOCK_TILE = 64     # rows and columns of c per block
WARP_TILE = 32      # rows and columns of c per warp: 2 x 2 fragment tiles
FRAGMENT = 16       # the tensor cores' tile
K_STEP = 32         # depth of the shared-memory tiles
LANES = 32          # threads of a warp, on threadIdx.x
INTRINSICS = {"float16": "pl_wmma_f16_16x16x16", "bfloat16": "pl_wmma_bf16_16x16x16"}


def matmul_tensorcore_kernel(m: int | None = None, n: int | None = None, k: int | None = None,
                             *, dtype: str = "float16"):
    """The kernel ``c[i, j] = sum(k, float32(a[i, k]) * float32(b[k, j]))``, sizes fixed where
    given (``M``, ``N``, ``K`` otherwise).

    >>> print(matmul_tensorcore_kernel(64, None, 32).program.params)
    ('N',)
    """
    if dtype not in INTRINSICS:
        raise ArgumentError(f"matmul_tensorcore: tensor cores take float16 or bfloat16 inputs, "
                            f"not {dtype!r}")
    knl = make_kernel("{ [i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
                      "c[i, j] = sum(k, float32(a[i, k]) * float32(b[k, j]))",
                      args=[ArrayArg("a", dtype), ArrayArg("b", dtype),
                            ArrayArg("c", "float32")], name="matmul_tc")
    fixed = {p: v for p, v in (("M", m), ("N", n), ("K", k)) if v is not None}
    return fix_parameters(knl, **fixed) if fixed else knl


def matmul_tensorcore(m: int | None = None, n: int | None = None, k: int | None = None, *,
                      dtype: str = "float16") -> Schedule:
    """The tensor-core schedule of ``c = a @ b`` (module arguments ``a``, ``b``, returns ``c``);
    build it with ``target="cuda"`` (tensor cores) or ``"opencl"`` (the same tiles, plain
    loops). Sizes left None are symbolic.

    >>> sch = matmul_tensorcore(dtype="float16")
    >>> sorted(b.name for b in sch.program.buffers if b.scope.value == "shared")
    ['a_fetch', 'acc_k', 'b_fetch']
    """
    knl = matmul_tensorcore_kernel(m, n, k, dtype=dtype)
    knl = split_iname(knl, "i", BLOCK_TILE, outer_tag="g.1")
    knl = split_iname(knl, "j", BLOCK_TILE, outer_tag="g.0")
    knl = split_iname(knl, "i_inner", WARP_TILE, outer_tag="l.2")
    knl = split_iname(knl, "j_inner", WARP_TILE, outer_tag="l.1")
    knl = split_iname(knl, "i_inner_inner", FRAGMENT)
    knl = split_iname(knl, "j_inner_inner", FRAGMENT)
    knl = split_iname(knl, "k", K_STEP)
    tile = ["i_inner_outer", "j_inner_outer", "i_inner_inner_outer", "i_inner_inner_inner",
            "j_inner_inner_outer", "j_inner_inner_inner", "k_inner"]
    knl = add_prefetch(knl, "a", tile, default_tag=None)
    knl = add_prefetch(knl, "b", tile, default_tag=None)
    # the copies over all 128 threads: 32 consecutive elements of a row per warp
    knl = tag_inames(knl, {"a_dim_1": "l.0"})
    knl = split_iname(knl, "a_dim_0", 2, inner_tag="l.1")
    knl = split_iname(knl, "a_dim_0_outer", 2, inner_tag="l.2")
    knl = split_iname(knl, "b_dim_1", LANES, inner_tag="l.0")
    knl = split_iname(knl, "b_dim_0", 2, inner_tag="l.1")
    knl = split_iname(knl, "b_dim_0_outer", 2, inner_tag="l.2")
    # the sums stay in shared memory, where every lane of a warp reaches them
    knl = set_temporary_address_space(knl, "acc_k", "local")
    sch = schedule_of(knl)
    # the tile's zeroing and its copy to c: the 32 lanes of each warp, one column of the
    # warp's 32 each (a row of c is one contiguous store of the warp)
    for statement in ("insn_init", "insn_store"):
        *_, tile, column = sch.state.stmt_path(statement)
        lanes = sch.fuse(LoopHandle(tile.id, tile.name), LoopHandle(column.id, column.name))
        sch.bind(lanes, "threadIdx.x")
    loops = {x.name: x for x in sch.get_loops("insn")}
    sch.reorder(loops["j_inner_inner_outer"], loops["i_inner_inner_inner"])
    sch.tensorize(loops["i_inner_inner_inner"], INTRINSICS[dtype])
    return sch


__all__ = ["matmul_tensorcore", "matmul_tensorcore_kernel"]
