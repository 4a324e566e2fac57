# SPDX-License-Identifier: Apache-2.0
"""GPU schedules of ``c = a @ b`` (float32, row-major): the four steps of seed 001's ladder.

Each function returns a ``pl.Schedule`` of ``c[i, j] = sum(k, a[i, k] * b[k, j])`` for the
GPU targets (``pl.build(sch, target="cuda")`` or ``"opencl"``); the module takes ``a`` and
``b`` and returns ``c``. Sizes left ``None`` are symbolic (``M``, ``N``, ``K``); a given size
is fixed in the kernel, which lets the CUDA target prove 16-byte alignment (``float4``) and
drop the bounds checks of full tiles. Every step is exact for any size, dividing the tiles or
not: isl writes the bounds of the edge tiles.

1. ``matmul_gpu_naive``: one thread per element of ``c``, 16 x 16 threads per block.
2. ``matmul_gpu_float4``: one thread per 4 consecutive elements of a row of ``c``: ``b`` is read
   128 bits at a time (a vectorized loop of 4 lanes) and the 4 sums stay in registers.
3. ``matmul_gpu_thread_tile``: a block computes 64 x 64 elements with 16 x 16 threads, each a
   4 x 4 tile in registers (4 rows unrolled, 4 columns as float4 lanes); each ``k`` step reuses
   4 values of ``a`` and 4 of ``b`` for 16 products.
4. ``matmul_gpu_shared``: step 3 with the 64 x 16 tile of ``a`` and the 16 x 64 tile of ``b``
   of each ``k`` step copied into shared memory by the whole block (``b`` with float4 copies),
   with the two barriers the exact dependence analysis places around the reads.
5. ``matmul_gpu_pipelined``: step 4 with both tiles double buffered (``double_buffer``), their
   copies one ``k`` step ahead (``distribute``, ``shift``, ``merge``: software pipelining,
   one barrier per step) and ``a``'s tile rows padded against bank conflicts
   (``storage_align``).

>>> from polyloop import ops
>>> sch = ops.matmul_gpu_shared()
>>> print(sch.program.buffer("a_fetch").scope.value)
shared
"""
from __future__ import annotations

from ..frontend.kernel import ArrayArg, make_kernel
from ..poly.tree import LoopNode, StmtNode, statements_under
from ..schedule.kernel import add_prefetch, fix_parameters, split_iname, tag_inames
from ..schedule.kernel import schedule_of
from ..schedule.schedule import Schedule

BLOCK = 16          # threads per block on each of x and y
TILE = 4            # elements per thread on each of x and y (steps 3 and 4)
K_STEP = 16         # the k extent of the shared tiles (step 4)


def matmul_gpu_kernel(m: int | None = None, n: int | None = None, k: int | None = None):
    """The kernel ``c[i, j] = sum(k, a[i, k] * b[k, j])`` on float32, sizes fixed where given.

    >>> print(matmul_gpu_kernel(64, None, 32).program.params)
    ('N',)
    """
    knl = make_kernel("{ [i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
                      "c[i, j] = sum(k, a[i, k] * b[k, j])",
                      args=[ArrayArg("a", "float32"), ArrayArg("b", "float32"),
                            ArrayArg("c", "float32")], name="matmul")
    fixed = {p: v for p, v in (("M", m), ("N", n), ("K", k)) if v is not None}
    return fix_parameters(knl, **fixed) if fixed else knl


def matmul_gpu_naive(m: int | None = None, n: int | None = None,
                     k: int | None = None) -> Schedule:
    """Step 1: one thread per element of ``c``, blocks of 16 x 16 threads.

    >>> "threadIdx" in str(matmul_gpu_naive())
    True
    """
    knl = matmul_gpu_kernel(m, n, k)
    knl = split_iname(knl, "i", BLOCK, outer_tag="g.1", inner_tag="l.1")
    knl = split_iname(knl, "j", BLOCK, outer_tag="g.0", inner_tag="l.0")
    return schedule_of(knl)


def matmul_gpu_float4(m: int | None = None, n: int | None = None,
                      k: int | None = None) -> Schedule:
    """Step 2: each thread sums 4 consecutive elements of a row, reading ``b`` as float4.

    >>> "vectorized" in str(matmul_gpu_float4())
    True
    """
    knl = matmul_gpu_kernel(m, n, k)
    knl = split_iname(knl, "i", BLOCK, outer_tag="g.1", inner_tag="l.1")
    knl = split_iname(knl, "j", BLOCK * TILE, outer_tag="g.0")
    knl = split_iname(knl, "j_inner", TILE, outer_tag="l.0")
    sch = schedule_of(knl)
    _update_alone(sch, ["j_inner_inner"])
    loops = {x.name: x for x in sch.get_loops("insn")}
    sch.reorder(loops["k"], loops["j_inner_inner"])
    _vectorize_all(sch, "j_inner_inner")
    return sch


def _update_alone(sch: Schedule, names: list[str]) -> None:
    """Distribute the loops ``names`` (innermost first) around the sum's update: its
    initialization and its store to ``c`` get loops of their own, so that the loops of the
    update can be reordered."""
    for name in names:
        handle = next(x for x in sch.get_loops("insn") if x.name == name)
        kids = sch.state.loop(handle.id).children
        at = next(k for k, c in enumerate(kids)
                  if (isinstance(c, StmtNode) and c.statement == "insn")
                  or (isinstance(c, LoopNode) and "insn" in statements_under(c)))
        if at + 1 < len(kids):
            handle, _ = sch.distribute(handle, at=at + 1)
        if at > 0:
            _, handle = sch.distribute(handle, at=at)


def _vectorize_all(sch: Schedule, name: str) -> None:
    """Vectorize every loop called ``name`` (the sum's, its initialization's, the copy-out's)."""
    for block in sch.blocks():
        for loop in sch.get_loops(block):
            if loop.name == name and sch.state.loop(loop.id).kind.value == "serial":
                sch.vectorize(loop)


def _tiled(m: int | None, n: int | None, k: int | None, k_step: int | None):
    knl = matmul_gpu_kernel(m, n, k)
    knl = split_iname(knl, "i", BLOCK * TILE, outer_tag="g.1")
    knl = split_iname(knl, "j", BLOCK * TILE, outer_tag="g.0")
    knl = split_iname(knl, "i_inner", TILE, outer_tag="l.1", inner_tag="unr")
    knl = split_iname(knl, "j_inner", TILE, outer_tag="l.0")
    if k_step:
        knl = split_iname(knl, "k", k_step)
    return knl


def _k_outside_the_tile(sch: Schedule, k: str) -> Schedule:
    """The register tile innermost: each ``k`` step loads 4 + 4 values for 16 products."""
    _update_alone(sch, ["j_inner_inner", "i_inner_inner"])
    loops = {x.name: x for x in sch.get_loops("insn")}
    sch.reorder(loops[k], loops["i_inner_inner"], loops["j_inner_inner"])
    _vectorize_all(sch, "j_inner_inner")
    return sch


def matmul_gpu_thread_tile(m: int | None = None, n: int | None = None,
                           k: int | None = None) -> Schedule:
    """Step 3: blocks of 64 x 64 elements, each of the 16 x 16 threads a 4 x 4 register tile.

    >>> "unrolled" in str(matmul_gpu_thread_tile())
    True
    """
    return _k_outside_the_tile(schedule_of(_tiled(m, n, k, None)), "k")


def matmul_gpu_shared(m: int | None = None, n: int | None = None,
                      k: int | None = None) -> Schedule:
    """Step 4: step 3 reading 64 x 16 and 16 x 64 tiles of ``a`` and ``b`` from shared memory,
    copied there by the whole block for each 16-wide step of ``k``.

    >>> sch = matmul_gpu_shared(128, 128, 64)
    """
    knl = _tiled(m, n, k, K_STEP)
    tile = ["i_inner_outer", "i_inner_inner", "j_inner_outer", "j_inner_inner", "k_inner"]
    knl = add_prefetch(knl, "a", tile, default_tag=None)
    knl = add_prefetch(knl, "b", tile, default_tag=None)
    # a's tile: 64 rows over threadIdx.y (4 rows each), 16 columns over threadIdx.x
    knl = split_iname(knl, "a_dim_0", BLOCK, outer_tag="for", inner_tag="l.1")
    knl = tag_inames(knl, {"a_dim_1": "l.0"})
    # b's tile: 16 rows over threadIdx.y, 64 columns as 16 threads x float4
    knl = tag_inames(knl, {"b_dim_0": "l.1"})
    knl = split_iname(knl, "b_dim_1", TILE, outer_tag="l.0")
    sch = schedule_of(knl)
    _vectorize_all(sch, "b_dim_1_inner")
    return _k_outside_the_tile(sch, "k_inner")


def matmul_gpu_pipelined(m: int | None = None, n: int | None = None,
                         k: int | None = None) -> Schedule:
    """Step 5: step 4 with the shared tiles double buffered and their copies issued one
    ``k`` step early (software pipelining: the loads of the next tiles are in flight while
    the current ones are multiplied; one barrier per step instead of two), and the rows of
    ``a``'s tile padded to 17 floats so that the two rows a warp reads at once fall in
    different memory banks.

    >>> sch = matmul_gpu_pipelined(128, 128, 64)
    >>> sch.program.buffer("a_fetch").stages
    2
    """
    sch = matmul_gpu_shared(m, n, k)
    k_outer = next(x for x in sch.get_loops("a_fetch") if x.name == "k_outer")
    copies = sum(1 for c in sch.state.loop(k_outer.id).children
                 if isinstance(c, LoopNode) and set(statements_under(c)) <= FETCHES)
    fetch, compute = sch.distribute(k_outer, at=copies)
    sch.shift(fetch, -1)            # the copies of step k + 1 run in step k
    sch.merge(fetch, compute)
    for tile in sorted(FETCHES):
        sch.double_buffer(tile)
    sch.storage_align("a_fetch", "a_fetch", axis=-2, factor=16, offset=1)
    return sch


FETCHES = frozenset({"a_fetch", "b_fetch"})

MATMUL_GPU_LADDER = {"naive": matmul_gpu_naive, "float4": matmul_gpu_float4,
                     "thread_tile": matmul_gpu_thread_tile, "shared": matmul_gpu_shared,
                     "pipelined": matmul_gpu_pipelined}

__all__ = ["MATMUL_GPU_LADDER", "matmul_gpu_float4", "matmul_gpu_kernel", "matmul_gpu_naive",
           "matmul_gpu_pipelined", "matmul_gpu_shared", "matmul_gpu_thread_tile"]
