# SPDX-License-Identifier: Apache-2.0
"""Matrix multiplication operators and their CPU schedules (register tiles over packed panels).

``C = A @ B`` with ``A: (m, k)`` and ``B: (k, n)``, and a batched ``D = max(A @ B, 0)``. Each
operator is a te builder plus a schedule function written with public primitives only; the
schedule's constants are keyword arguments (a tuner can search over them).

The recipe (the one ``polyloop demo`` uses, generalised):
- B is copied into column panels ``B_packed[j // nr, k, j % nr]`` (``transform_layout``), each
  panel contiguous along k; the copy of a panel is made by the thread that owns the panel, right
  before it is used (``compute_at`` on the panel loop), so the panel is in cache when read.
- C is computed in ``mr x nr`` tiles held in a tile-local buffer (``cache_write "local"``, sized
  to the tile by storage compaction), so that gcc keeps it in ``mr * nr / lanes`` vector
  registers: per step of k, ``mr`` broadcasts of A and ``nr / lanes`` vector loads of B feed
  ``mr * nr / lanes`` FMAs.
- The loop over panels is the parallel loop (each thread owns whole panels of C: no false
  sharing); the tile rows and the vectors of a row are unrolled, the lanes vectorized.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import matmul, schedule_matmul
>>> A = pl.placeholder((37, 29), "float32", name="A")
>>> B = pl.placeholder((29, 45), "float32", name="B")
>>> mod = pl.build(schedule_matmul(matmul(A, B)))
>>> a = np.ones((37, 29), "float32"); b = np.ones((29, 45), "float32")
>>> float(mod(a, b)[36, 44])
29.0
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.expr import Const
from ..ir.elementwise import maximum
from ..schedule import Schedule
from ..schedule.intrin_registry import TensorIntrin, lookup
from .knobs import check_knobs, default_lanes

#: vectors per panel of B in the default register tile (``matmul_panel_width`` columns)
DEFAULT_NR_VECTORS = 4


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``C[i, j] = sum_k a[i, k] * b[k, j]`` for ``a: (m, k)`` and ``b: (k, n)`` (any sizes,
    constant or ``pl.var``); the result tensor is named ``C``.

    >>> import polyloop as pl
    >>> C = matmul(pl.placeholder((4, 3), name="A"), pl.placeholder((3, 5), name="B"))
    >>> C
    Tensor(C: float32[4, 5])
    """
    _check_operands("matmul", a, b, 2)
    k = te.reduce_axis((0, a.shape[1]), name=reduction_axis_name(a, b))
    return te.compute((a.shape[0], b.shape[1]),
                      lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")


def batch_matmul_relu(a: Tensor, b: Tensor) -> Tensor:
    """``D[p, i, j] = max(sum_k a[p, i, k] * b[p, k, j], 0)`` for ``a: (batch, m, k)`` and
    ``b: (batch, k, n)``; the product is ``C``, the result ``D``.

    >>> import polyloop as pl
    >>> D = batch_matmul_relu(pl.placeholder((2, 4, 3), name="A"),
    ...                       pl.placeholder((2, 3, 5), name="B"))
    >>> D
    Tensor(D: float32[2, 4, 5])
    """
    _check_operands("batch_matmul_relu", a, b, 3)
    k = te.reduce_axis((0, a.shape[2]), name=reduction_axis_name(a, b))
    c = te.compute((a.shape[0], a.shape[1], b.shape[2]),
                   lambda p, i, j: te.sum(a[p, i, k] * b[p, k, j], axis=k), name="C")
    return te.compute(c.shape, lambda p, i, j: maximum(c[p, i, j], 0.0), name="D")


def matmul_relu(a: Tensor, b: Tensor) -> Tensor:
    """``D[i, j] = max(sum_k a[i, k] * b[k, j], 0)`` for ``a: (m, k)`` and ``b: (k, n)``;
    the product is ``C``, the result ``D``.

    >>> import polyloop as pl
    >>> matmul_relu(pl.placeholder((4, 3), name="A"), pl.placeholder((3, 5), name="B"))
    Tensor(D: float32[4, 5])
    """
    c = matmul(a, b)
    return te.compute(c.shape, lambda i, j: maximum(c[i, j], 0.0), name="D")


def reduction_axis_name(a: Tensor, b: Tensor) -> str:
    """``k``, unless a size parameter already has that name (``pl.var("k")``).

    >>> import polyloop as pl
    >>> reduction_axis_name(pl.placeholder((pl.var("k"), 3)), pl.placeholder((3, 2)))
    'k_red'
    """
    sizes = " ".join(str(d) for d in a.shape + b.shape)
    return "k" if "k" not in sizes.replace("(", " ").replace(")", " ").split() else "k_red"


def _check_operands(op: str, a: Tensor, b: Tensor, ndim: int) -> None:
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, Tensor) or t.ndim != ndim:
            raise ScheduleError(f"{op}: operand {name} must be a {ndim}-D tensor, got {t!r}")
    if str(a.shape[-1]) != str(b.shape[-2]):
        raise ScheduleError(f"{op}: the reduction extents differ: a is {a!r}, b is {b!r} "
                            "(a's last dimension must equal b's second to last)")


def schedule_matmul(c: Tensor, *, mr: int = 6, nr_vectors: int | None = None,
                    lanes: int | None = None,
                    pack_in_panel: bool | None = None, intrin: TensorIntrin | str | None = None,
                    kc: int = 256, order: str = "panel", pack_a: bool = False,
                    prefetch: int = 0) -> Schedule:
    """The register-tile schedule of ``c = matmul(a, b)``.

    ``mr`` rows by ``nr_vectors * lanes`` columns of C are accumulated in registers (the default
    6 x 64 tile uses 24 of AVX-512's 32 vector registers); ``lanes`` defaults to the host's
    float32 vector width. With ``pack_in_panel`` each panel of B is packed by the thread that
    then uses it; otherwise B is packed whole before the product. The default packs in the panel
    when the row count is a constant (a symbolic one may be 0: then nothing under the panel loop
    reads the panel, and compute_at rightly refuses to move the packing there).

    With ``intrin`` (a gemm micro-kernel such as ``polyloop.intrin.gemm_intrin()``; ``mr``,
    ``nr_vectors`` and ``lanes`` are then the intrinsic's) k is blocked by ``kc`` and each
    ``rows x cols x kc`` block becomes one call that updates C in place; tiles cut by the
    matrix edges run as loops. ``order="panel"``: ``j0 (parallel) > k0 > i0``, each thread packs
    and keeps its B panel; ``order="kslice"``: ``k0 > j0 (parallel) > i0``, a kc-slice of A is
    shared by all panels. ``pack_a`` (for an intrinsic made with ``packed_a=True``) also copies
    A into panels of ``rows`` rows, contiguous along k, in parallel before the product. (A product whose constant sizes leave no full ``rows x cols`` tile,
    or a reduction of extent 1, has nothing to call the intrinsic on: it gets the register-tile
    schedule.)

    ``c`` may also be ``matmul_packed(a, packed, n)``, whose B comes in panels already: nothing
    is copied, ``nr_vectors`` defaults to the panels' width in vectors (``lanes`` wide), and a
    width that differs from the panels' (or from the intrinsic's ``cols``) is refused.
    ``nr_vectors`` otherwise defaults to 4.

    ``prefetch``: the loop that packs a panel of B prefetches the panel's row ``prefetch`` rows
    of B ahead (``Schedule.prefetch``; 0: none, the default). Measured on the 2-core AVX-512 VM
    it changes nothing beyond noise (packing is ~1% of the work and B's rows are a constant
    stride the hardware prefetchers follow); it is a knob for the tuner, not a default. Only a
    panel packed per panel loop has a bounded region per row; packing B whole is left as is,
    and B packed ahead of time (``matmul_packed``) has no packing loop to prefetch in.

    >>> import polyloop as pl
    >>> A, B = pl.placeholder((64, 64), name="A"), pl.placeholder((64, 64), name="B")
    >>> sch = schedule_matmul(matmul(A, B), mr=4)
    >>> [loop.name for loop in sch.get_loops("C")][:2]
    ['j_0', 'i_0']
    """
    a, b = _operands(c, "schedule_matmul", 2, packed_ok=True)
    lanes = default_lanes(str(c.dtype)) if lanes is None else lanes
    nr_vectors = _panel_vectors(b, nr_vectors, lanes)
    if order not in ("panel", "kslice"):
        raise ScheduleError(f"schedule_matmul: order must be 'panel' or 'kslice', got {order!r}")
    if prefetch:
        check_knobs("schedule_matmul", prefetch=prefetch)
    sch = Schedule(c)
    if intrin is not None and _has_full_tile(a, c, lookup(intrin)):
        _micro_kernel(sch, c.name, a.name, b, intrin, kc=kc, order=order,
                      pack_in_panel=pack_in_panel, pack_a=pack_a)
    else:
        _register_tile(sch, c.name, b.name, batch=False, mr=mr, nr_vectors=nr_vectors,
                       lanes=lanes, pack_in_panel=pack_in_panel, packed=b.ndim == 3)
    if prefetch and b.ndim == 2:   # B packed ahead of time: no packing loop to prefetch in
        _prefetch_panel_rows(sch, b.name, prefetch)
    return sch


def _panel_vectors(b: Tensor, nr_vectors: int | None, lanes: int) -> int:
    """Vectors per panel: the packed panels' width in vectors, else ``nr_vectors`` (default 4);
    refuses a width the packed panels do not have."""
    check_knobs("schedule_matmul", lanes=lanes)
    if b.ndim == 2:
        return DEFAULT_NR_VECTORS if nr_vectors is None else nr_vectors
    nr = b.shape[2].value
    want = nr // lanes if nr_vectors is None else nr_vectors
    if nr % lanes or want * lanes != nr:
        raise ScheduleError(f"schedule_matmul: {b.name} is packed in panels of {nr} columns, "
                            f"the tile is {want} x {lanes} = {want * lanes} columns wide; pass "
                            f"nr_vectors and lanes whose product is {nr}, or pack with "
                            f"pack_matmul_weight(b, {want * lanes})")
    return want


def _prefetch_panel_rows(sch: Schedule, b_name: str, distance: int) -> None:
    """Prefetch B's rows ``distance`` ahead in the loop over the rows of a packed panel (the
    second innermost loop of the packing), when a row of a panel is what one iteration reads."""
    pack = f"{b_name}_packed_in"
    rows = sch.get_loops(pack)
    if len(rows) < 3:   # B packed whole: one iteration reads a whole row of B
        return
    sch.prefetch(pack, b_name, rows[-2], distance=distance)


def schedule_batch_matmul_relu(d: Tensor, *, mr: int = 8, nr_vectors: int = 2,
                               lanes: int | None = None,
                               pack_in_panel: bool | None = None) -> Schedule:
    """The register-tile schedule of ``d = batch_matmul_relu(a, b)``: the matmul recipe per
    batch, the batch loop parallel (B packed per batch by its thread), ReLU applied as each tile
    is written back (no separate pass over C).

    >>> import polyloop as pl
    >>> A, B = pl.placeholder((2, 8, 8), name="A"), pl.placeholder((2, 8, 8), name="B")
    >>> sch = schedule_batch_matmul_relu(batch_matmul_relu(A, B), mr=4, nr_vectors=1)
    >>> [loop.name for loop in sch.get_loops("C")][:3]
    ['p', 'j_0', 'i_0']
    """
    c = _relu_input(d, "schedule_batch_matmul_relu", "batch_matmul_relu")
    _, b = _operands(c, "schedule_batch_matmul_relu", 3)
    sch = Schedule(d)
    _register_tile(sch, c.name, b.name, batch=True, mr=mr, nr_vectors=nr_vectors,
                   lanes=default_lanes(str(c.dtype)) if lanes is None else lanes,
                   pack_in_panel=pack_in_panel,
                   epilogue=d.name)
    return sch


def schedule_matmul_relu(d: Tensor, *, mr: int = 6, nr_vectors: int = 4,
                         lanes: int | None = None,
                         pack_in_panel: bool | None = None) -> Schedule:
    """The register-tile schedule of ``d = matmul_relu(a, b)``: ``schedule_matmul``'s recipe,
    with ReLU applied as each tile of C is written back (no separate pass over C).

    >>> import numpy as np, polyloop as pl
    >>> A, B = pl.placeholder((13, 9), name="A"), pl.placeholder((9, 70), name="B")
    >>> mod = pl.build(schedule_matmul_relu(matmul_relu(A, B), mr=4))
    >>> a = np.random.rand(13, 9).astype("float32") - 0.5; b = np.random.rand(9, 70).astype("float32")
    >>> bool(np.allclose(mod(a, b), np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6))
    True
    """
    c = _relu_input(d, "schedule_matmul_relu", "matmul_relu")
    _, b = _operands(c, "schedule_matmul_relu", 2)
    sch = Schedule(d)
    _register_tile(sch, c.name, b.name, batch=False, mr=mr, nr_vectors=nr_vectors,
                   lanes=default_lanes(str(c.dtype)) if lanes is None else lanes,
                   pack_in_panel=pack_in_panel, epilogue=d.name)
    return sch


def _relu_input(d: Tensor, who: str, builder: str) -> Tensor:
    """The matmul stage under the ReLU ``d`` made by ``builder``."""
    if not isinstance(d, Tensor) or len(d.inputs) != 1 or d.inputs[0].is_placeholder:
        raise ScheduleError(f"{who}: expected the result of {builder}(a, b), got {d!r}")
    return d.inputs[0]


def _has_full_tile(a: Tensor, c: Tensor, intrin: TensorIntrin) -> bool:
    """Whether some ``rows x cols`` tile of the product ``c`` is full, with more than one step
    of k (symbolic sizes: it may be, at run time)."""
    rows, cols = intrin.extents[0], intrin.extents[1]
    needs = ((a.shape[0], rows), (c.shape[1], cols), (a.shape[1], 2))
    return all(not isinstance(e, Const) or e.value >= least for e, least in needs)


def _operands(c: Tensor, who: str, ndim: int,
              packed_ok: bool = False) -> tuple[Tensor, Tensor]:
    """The placeholders ``a`` and ``b`` of the product ``c``; with ``packed_ok``, ``b`` may be
    the 3-D panels of ``matmul_packed``."""
    b_dims = (ndim, 3) if packed_ok else (ndim,)
    if (not isinstance(c, Tensor) or c.is_placeholder or len(c.inputs) != 2
            or any(not t.is_placeholder for t in c.inputs) or c.inputs[0].ndim != ndim
            or c.inputs[1].ndim not in b_dims):
        what = "matmul(a, b)" if ndim == 2 else "batch_matmul_relu(a, b)"
        raise ScheduleError(f"{who}: expected the product of {what} on two {ndim}-D "
                            f"placeholders, got {c!r}")
    return c.inputs[0], c.inputs[1]


def _register_tile(sch: Schedule, block: str, b_name: str, *, batch: bool, mr: int,
                   nr_vectors: int, lanes: int, pack_in_panel: bool | None,
                   epilogue: str | None = None, packed: bool = False) -> None:
    """The shared recipe; ``batch`` adds a leading batch loop fused into the parallel loop;
    ``packed``: B is already in panels (nothing to copy)."""
    check_knobs("schedule_matmul", mr=mr, nr_vectors=nr_vectors, lanes=lanes)
    nr = nr_vectors * lanes
    if packed:
        pack_in_panel = False
    elif batch:
        sch.transform_layout(block, b_name, lambda p, k, j: (p, j // nr, k, j % nr))
    else:
        sch.transform_layout(block, b_name, lambda k, j: (j // nr, k, j % nr))
    tile = sch.cache_write(block, "local")
    c = sch.get_block(block)
    *outer, i, j, k = sch.get_loops(c)
    if pack_in_panel is None:
        rows = sch.program.buffer(block).shape[-2]
        pack_in_panel = isinstance(rows, Const) and rows.value > 0
    i0, i1 = sch.split(i, factors=[None, mr])
    j0, j1, j2 = sch.split(j, factors=[None, nr_vectors, lanes])
    sch.reorder(*outer, j0, i0, k, i1, j1, j2)
    # One parallel loop: the batch loop when there is one (whole matrices per thread; fusing it
    # with the panel loop would give the indices divisions by the panel count), else the panels.
    panel = outer[0] if outer else j0
    sch.parallel(panel)
    sch.unroll(i1)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(c, k)
    if epilogue is not None:
        sch.reverse_compute_inline(sch.get_block(epilogue))
    sch.reverse_compute_at(tile, i0)
    if pack_in_panel:
        sch.compute_at(f"{b_name}_packed_in", panel)


def _micro_kernel(sch: Schedule, block: str, a_name: str, b: Tensor,
                  intrin: TensorIntrin | str, *, kc: int, order: str, pack_in_panel: bool | None,
                  pack_a: bool) -> None:
    """k-blocked loops around a ``rows x cols x kc`` micro-kernel call updating C in place."""
    check_knobs("schedule_matmul", kc=kc)
    it = lookup(intrin)
    rows, cols = it.extents[0], it.extents[1]
    b_name = b.name
    if b.ndim == 3 and b.shape[2].value != cols:
        raise ScheduleError(f"schedule_matmul: {b_name} is packed in panels of "
                            f"{b.shape[2].value} columns, the intrinsic {it.name} computes "
                            f"{cols}; pack with pack_matmul_weight(b, {cols})")
    if b.ndim == 2:
        sch.transform_layout(block, b_name, lambda k, j: (j // cols, k, j % cols))
    if pack_a:
        sch.transform_layout(block, a_name, lambda i, k: (i // rows, k, i % rows))
    c = sch.get_block(block)
    i, j, k = sch.get_loops(c)
    if pack_in_panel is None:
        rows_c = sch.program.buffer(block).shape[0]
        pack_in_panel = isinstance(rows_c, Const) and rows_c.value > 0
    i0, i1 = sch.split(i, factors=[None, rows])
    j0, j1 = sch.split(j, factors=[None, cols])
    k0, k1 = sch.split(k, factors=[None, kc])
    if order == "panel":
        sch.reorder(j0, k0, i0, k1, i1, j1)
    else:
        sch.reorder(k0, j0, i0, k1, i1, j1)
    init = sch.decompose_reduction(c, k0)
    # tiles cut by the edges keep the loops: their columns run as (masked) vectors
    sch.vectorize(j1)
    sch.tensorize(k1, it)
    sch.parallel(j0)
    init_loops = sch.get_loops(init)
    sch.parallel(init_loops[0])
    sch.vectorize(init_loops[-1])
    pack = f"{b_name}_packed_in"
    if b.ndim == 3:
        pass                        # B came packed: no copy to place
    elif order == "panel" and pack_in_panel:
        sch.compute_at(pack, j0)
    else:
        x0, x1 = sch.get_loops(pack)
        x10, x11 = sch.split(x1, factors=[None, cols])
        sch.reorder(x10, x0, x11)
        sch.parallel(x10)
    if pack_a:
        y0, y1 = sch.get_loops(f"{a_name}_packed_in")
        y00, y01 = sch.split(y0, factors=[None, rows])
        sch.reorder(y00, y1, y01)
        sch.parallel(y00)
