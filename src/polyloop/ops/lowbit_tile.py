# SPDX-License-Identifier: Apache-2.0
"""The schedule the low-bit products share (int8 and bf16 matmuls, batched or not): a grouped
right operand stored in column panels, a local tile of the sum updated by one call of a
dot-product intrinsic over all of k, the epilogue applied as the tile is written back.

The stages it expects (made by ``matmul_int8``, ``matmul_bf16``): ``B_g[..., g, j, t]`` (the
right operand in groups along k), ``C[..., i, j]`` (the sum over ``g, t``), the output, and
optionally ``A_g`` (the left operand grouped) and the row / column sums ``A_sum`` / ``B_sum``.
The intrinsic is found by name (``polyloop.intrin.lowbit`` registers the built-in ones), so
that which body runs follows the host's CPU flags (``polyloop.util.isa.lowbit_body``).
"""
from __future__ import annotations

import re

from .. import config
from ..errors import ScheduleError
from ..frontend.te import Tensor
from ..ir.expr import Const, Expr, Load, Select, Var, loads, walk
from ..ir.program import BufferRole
from ..poly.assumptions import with_upper_bound
from ..poly.isl_util import NotAffine
from ..schedule import Schedule
from ..schedule.auto_common import cache_sizes
from ..schedule.intrin_registry import TensorIntrin, lookup
from ..util.isa import host_isa, lowbit_body
from .knobs import check_knobs
from .quantized import accumulation_limit

# the default tile of each body (rows x cols of the sum)
DEFAULT_TILES = {"avx512": (6, 32), "amx": (32, 32), "portable": (6, 32)}
# tile heights for a convolution's rows of output pixels, best first: one that divides the
# row leaves no short tile at its end (whose few accumulators wait on the instruction latency)
ROW_HEIGHTS = (8, 7, 6)


def default_tile(family: str) -> tuple[int, int]:
    """The ``rows x cols`` of the default tile of the best body the host runs."""
    return DEFAULT_TILES[lowbit_body(host_isa(config.CONFIG.cc), family)]


def host_intrin(family: str, rows: int | None = None, cols: int | None = None,
                window: bool = False) -> TensorIntrin:
    """The built-in ``family`` ("u8s8" or "bf16") tile of the best body the host runs (its
    window variant for a convolution)."""
    kind = lowbit_body(host_isa(config.CONFIG.cc), family)
    r, c = DEFAULT_TILES[kind]
    return lookup(f"pl_lowbit_{family}_{kind}_{rows or r}x{cols or c}"
                  + ("_win" if window else ""))


def tile_of(intrin: TensorIntrin) -> tuple[int, int]:
    """The ``rows x cols`` tile a low-bit intrinsic computes per call (its name ends with it:
    ``pl_lowbit_u8s8_avx512_6x32``)."""
    m = re.search(r"_(\d+)x(\d+)(_win)?\Z", intrin.name)
    if m is None or intrin.extents[:2] != (None, None):
        raise ScheduleError(f"intrinsic {intrin.name!r} is not a low-bit dot-product tile "
                            "(polyloop.intrin.lowbit_intrin)")
    return int(m[1]), int(m[2])


def stages(y: Tensor) -> dict[str, Tensor]:
    """Every tensor ``y`` is computed from, by name (``y`` included)."""
    found: dict[str, Tensor] = {}
    todo = [y]
    while todo:
        t = todo.pop()
        if t.name not in found:
            found[t.name] = t
            todo.extend(t.inputs)
    return found


def schedule_product(y: Tensor, family: str, *, intrin: TensorIntrin | str | None,
                     rows: int | None, cols: int | None, parallel: bool, who: str,
                     panels: int | None = None) -> Schedule:
    """The schedule of a low-bit product ``y`` (see the module docstring)."""
    found = stages(y)
    if "C" not in found or y.name == "C" or not _right_operand(found):
        raise ScheduleError(f"{who}: expected the result of a low-bit matmul builder "
                            f"(stages B_g or packed panels, C and an output), got {y!r}")
    it = _chosen(family, intrin, rows, cols, who)
    program = y.to_program()
    if family == "u8s8":
        program = _length_limit(program, found, who)
    sch = Schedule(program)
    packed = _right_operand(found)
    if packed != "B_g" and found[packed].shape[-2].value != tile_of(it)[1]:  # type: ignore
        raise ScheduleError(f"{who}: {packed} is packed in panels of "
                            f"{found[packed].shape[-2]} columns, intrinsic {it.name} computes "
                            f"{tile_of(it)[1]}; pack with pack_int8_weight(b, {tile_of(it)[1]})")
    inline_epilogue(sch, found, y.name)
    tile_product(sch, it, epilogue=y.name, parallel=parallel,
                 packed="B_g" if packed == "B_g" else None, panels=panels)
    place_packing(sch, found, parallel=parallel, cols=tile_of(it)[1])
    roll_padded_groups(sch)
    return sch


# the stages a low-bit builder makes before the sum's consumers
# (a convolution's epilogue ``E`` is the builder's too: the chain is inlined into the output)
_BUILDER_STAGES = frozenset({"C", "E", "A_g", "B_g", "X_g", "W_g", "A_sum", "B_sum"})
# what packs a convolution's weights for each family
_PACKERS = {"u8s8": "pack_conv_int8_weight", "bf16": "pack_bf16_conv_weight"}


def inline_epilogue(sch: Schedule, found: dict[str, Tensor], out: str) -> None:
    """Inline every stage between the sum ``C`` and the result ``out`` into its readers: an
    elementwise chain after the product (a graph's bias, residual add, activation) then is
    one stage, which the schedule applies as each tile is written back. A stage that cannot be
    inlined raises the ``ScheduleError`` of ``compute_inline``."""
    def reads_sum(t: Tensor) -> bool:
        return any(i.name == "C" or (not i.is_placeholder and reads_sum(i)) for i in t.inputs)
    for name, t in found.items():
        if name != out and name not in _BUILDER_STAGES and not t.is_placeholder \
                and reads_sum(t):
            sch.compute_inline(name)


def _right_operand(found: dict[str, Tensor]) -> str | None:
    """``B_g``, or the packed panels C reads (a 4-D placeholder), or None."""
    if "B_g" in found:
        return "B_g"
    c = found["C"]
    return next((t.name for t in reversed(c.inputs) if t.is_placeholder and t.ndim == 4), None)


def _chosen(family: str, intrin: TensorIntrin | str | None, rows: int | None,
            cols: int | None, who: str, window: bool = False) -> TensorIntrin:
    """``intrin``, or the host's best ``family`` tile (``rows x cols`` of it)."""
    if intrin is None:
        return host_intrin(family, rows, cols, window)
    if rows or cols:
        raise ScheduleError(f"{who}: rows and cols are the intrinsic's; pass one or the other")
    return lookup(intrin)


def _length_limit(program, found: dict[str, Tensor], who: str):
    """The program assuming a symbolic k no longer than the int32 sum holds exactly (packed
    panels have a constant k, which the builder checked)."""
    if "B_g" not in found:
        return program
    b = found["B_g"].inputs[0]
    k_len: Expr = b.shape[-2]
    if isinstance(k_len, Const):
        return program        # the builder checked it
    return _limited(program, k_len, "A_sum" in found or "B_sum" in found, who)


def _limited(program, length: Expr, zero_points: bool, who: str):
    """The program assuming a reduction ``length`` within the int32 bound (products of up to
    255 x 255 with zero points or offsets, else 255 x 128); a constant one was checked."""
    if isinstance(length, Const):
        return program
    limit = accumulation_limit(255, 255) if zero_points else accumulation_limit(255, 128)
    try:
        return with_upper_bound(program, length, limit)
    except NotAffine:
        raise ScheduleError(f"{who}: the reduction length {length} is not affine in the sizes, "
                            "so its int32 bound cannot be checked; give it a constant or "
                            "affine extent") from None


def panel_block(sch: Schedule, block: str, packed_bytes: int | None, cols: int) -> int:
    """Panels of the right operand a thread keeps in its L2 while the rows go by: half the L2
    over a panel's bytes (4 where k is symbolic), at most the thread's share of the panels."""
    _, l2 = cache_sizes()
    count = max(1, (l2 // 2) // packed_bytes) if packed_bytes else 4
    columns = sch.program.buffer(block).shape[-1]
    if isinstance(columns, Const):
        share = -(-columns.value // cols) // max(1, config.CONFIG.threads)
        count = max(1, min(count, share))
    return count


def tile_product(sch: Schedule, intrin: TensorIntrin, *, epilogue: str | None, parallel: bool,
                 block: str = "C", packed: str | None = "B_g", panels: int | None = None,
                 group: int | None = None) -> tuple[int, ...]:
    """``block``'s ``rows x cols`` tiles summed locally by ``intrin`` and written back through
    ``epilogue`` (None: the elementwise consumers that can be); ``packed`` stored in panels of
    ``cols`` columns (None: it came packed). With ``group`` the block sums over one plain k
    (a user's ``A[i, k] * B[k, j]``): k is split into groups and ``packed`` (2-D) stored at
    ``(j // cols, k // group, j % cols, k % group)``.

    The loops: ``[batch] > jo > i0 > ji > [tile]``: a block of ``panels`` panels (``jo``) is
    summed against every row tile (``i0``), panel by panel (``ji``): a row tile of the left
    operand stays in L1 and the block of panels in L2. Returns the ids of the loops ``jo`` and
    ``i0``."""
    rows, cols = tile_of(intrin)
    extents = sch.program.buffer(block).shape
    if packed is not None and group is not None:
        sch.transform_layout(block, packed, lambda k, j: (j // cols, k // group, j % cols,
                                                          k % group))
    elif packed is not None:
        sch.transform_layout(block, packed, lambda *x: (
            *x[:-3], x[-2] // cols, x[-3], x[-2] % cols, x[-1]))
    write_back = sch.cache_write(block, "local")
    c = sch.get_block(block)
    if group is not None:
        *outer, i, j, k = sch.get_loops(c)
        g, t = sch.split(k, [None, group])
    else:
        *outer, i, j, g, t = sch.get_loops(c)
    if panels is None:
        panels = panel_block(sch, block, _panel_bytes(sch, c), cols)
    check_knobs("tile_product", panels=panels)
    i0, i1 = sch.split(i, [None, rows])
    jo, ji, j1 = sch.split(j, [None, panels, cols])
    sch.reorder(*outer, jo, i0, ji, g, i1, j1, t)
    sch.decompose_reduction(c, g)
    sch.tensorize(g, intrin)
    consumers = [epilogue] if epilogue is not None else [b.name for b in sch.get_consumers(
        write_back)]
    for name in consumers:
        try:
            sch.reverse_compute_inline(sch.get_block(name))
        except ScheduleError:
            if epilogue is not None:
                raise
    sch.reverse_compute_at(write_back, ji)
    *_, last = sch.get_loops(write_back)
    sch.vectorize(last)
    if parallel:
        sch.parallel(_parallel_loop(extents, outer, jo))
    return jo.id, i0.id


def _parallel_loop(extents: tuple, outer: list, jo):
    """The first batch loop of more than one iteration (a batch of constant size 1 keeps the
    threads idle), else the blocks of panels."""
    for loop, extent in zip(outer, extents):
        if not (isinstance(extent, Const) and extent.value == 1):
            return loop
    return jo


def _panel_bytes(sch: Schedule, c, dims: int = 3) -> int | None:
    """Bytes of one panel of the right operand (its ``dims`` last dimensions: k in groups,
    the panel's columns, the group), when they are constants."""
    stmt = next(s for s in sch.program.statements if s.block_name == c.name and not s.is_init)
    right = loads(stmt.value)[-1]
    buf = sch.program.buffer(right.buffer)
    size = buf.dtype.itemsize
    for d in buf.shape[-dims:]:
        if not isinstance(d, Const):
            return None
        size *= d.value
    return size


def place_packing(sch: Schedule, found: dict[str, Tensor], *, parallel: bool,
                  cols: int) -> None:
    """``B_g`` packed by the thread that owns its block of panels, the other stages (``A_g``,
    sums) in nests of their own, outermost loop parallel."""
    blocks = {b.name for b in sch.blocks()}
    for name in ("A_g", "A_sum", "B_sum"):
        if name in blocks and parallel:
            sch.parallel(sch.get_loops(name)[0])
    if "B_g" not in found:
        return
    panel = sch.get_loops("C")[found["C"].ndim - 2]
    b_g, c = found["B_g"], found["C"]
    rows = c.shape[-2]
    # one B per output matrix: packed in its panel, unless the rows may be none (a symbolic
    # count may be 0: then nothing under the panel loop reads the panel). A batched B is
    # packed whole in a nest of its own: packed at a panel under the batch loops, its local
    # copy was declared twice in the generated C and the tiles read the unwritten one.
    if b_g.ndim == c.ndim + 1 == 3 and isinstance(rows, Const) and rows.value > 0:
        sch.compute_at("B_g", panel)
    elif parallel:
        sch.parallel(sch.get_loops("B_g")[0])
    _panel_order(sch, cols)


def roll_padded_groups(sch: Schedule) -> None:
    """Keep the group loop (innermost) of each grouping stage that pads with zeros a loop for
    gcc: unrolled, its conditional loads send gcc 12's vectorizer into tens of seconds of
    compile time for a few dozen statements (a constant k of 37 in groups of 4)."""
    for block in ("A_g", "B_g", "X_g", "W_g"):
        if not sch.program.has_buffer(block):
            continue
        stmt = next((st for st in sch.program.statements if st.block_name == block), None)
        if stmt is not None and any(isinstance(e, Select) for e in walk(stmt.value)):
            sch.unroll(sch.get_loops(block)[-1], 1)


def _panel_order(sch: Schedule, cols: int) -> None:
    """The packing loops panel by panel: ``g > j > t`` becomes ``panel > g > column > t``, so
    that each panel is written in order and its index needs no division (gcc vectorizes the
    4 x cols transposition of each group)."""
    *_, g, j, t = sch.get_loops("B_g")
    jp, jj = sch.split(j, [None, cols])
    sch.reorder(jp, g, jj, t)


def schedule_window(y: Tensor, family: str, *, intrin: TensorIntrin | str | None,
                    rows: int | None, cols: int | None, panels: int | None, parallel: bool,
                    who: str) -> Schedule:
    """The schedule of a low-bit convolution ``y`` (stages ``X_g``, ``W_g``, ``C``; see
    ``conv_lowbit``): ``jo > n > y (parallel) > x0 > ji > r > s > [tile]``, then the tile's
    epilogue ``E`` (vector code along the output channels) and its copy into the output."""
    found = stages(y)
    panels_of = _window_weights(found)
    if not {"C", "X_g"} <= set(found) or panels_of is None or y.name == "C":
        raise ScheduleError(f"{who}: expected the result of a low-bit conv2d builder (stages "
                            f"X_g, W_g or packed weights, C and an output), got {y!r}")
    width = found["C"].shape[2] if "C" in found else None     # output columns, any layout
    if intrin is None and rows is None and isinstance(width, Const) \
            and lowbit_body(host_isa(config.CONFIG.cc), family) != "amx":
        rows = next((h for h in ROW_HEIGHTS if width.value % h == 0), None)
    w = found[panels_of]
    # (R, S, groups, group) of the weights: W_g[r, s, g, k, t] or panels[p, r, s, g, k, t]
    r_ext, s_ext, cg, group = (w.shape[0], w.shape[1], w.shape[2], w.shape[4]) \
        if panels_of == "W_g" else (w.shape[1], w.shape[2], w.shape[3], w.shape[5])
    # a 1 x 1 window has nothing for the window variant to sum over
    taps = not (isinstance(r_ext, Const) and isinstance(s_ext, Const)
                and r_ext.value * s_ext.value == 1)
    it = _chosen(family, intrin, rows, cols, who, window=taps)
    rows, cols = tile_of(it)
    if panels_of != "W_g" and w.shape[4].value != cols:  # type: ignore[attr-defined]
        raise ScheduleError(f"{who}: {panels_of} is packed in panels of {w.shape[4]} "
                            f"channels, intrinsic {it.name} computes {cols}; pack with "
                            f"{_PACKERS[family]}(w, {cols})")
    program = y.to_program()
    if family == "u8s8":
        program = _limited(program, cg * group * r_ext * s_ext, "A_sum" in found
                           or "B_sum" in found, who)
    sch = Schedule(program)
    if panels_of == "W_g":
        sch.transform_layout("C", "W_g", lambda r, s, g, k, t: (k // cols, r, s, g, k % cols, t))
    write_back = sch.cache_write("C", "local")
    c = sch.get_block("C")
    n, yy, x, k, r, s, g, t = sch.get_loops(c)
    if panels is None:
        panels = panel_block(sch, "C", _panel_bytes(sch, c, dims=5), cols)
    check_knobs(who, panels=panels)
    x0, x1 = sch.split(x, [None, rows])
    jo, ji, j1 = sch.split(k, [None, panels, cols])
    sch.reorder(jo, n, yy, x0, ji, r, s, g, x1, j1, t)
    sch.decompose_reduction(c, r)
    if _plain_copy(sch, "X_g"):
        sch.compute_inline("X_g")
    sch.tensorize(r if it.name.endswith("_win") else g, it)
    inline_epilogue(sch, found, y.name)
    _epilogue_then_copy(sch, write_back, ji, y.name)
    if panels_of == "W_g":
        # the weights panel by panel (each written in order), the panels in parallel
        r, s, g, k, t = sch.get_loops("W_g")
        kp, kk = sch.split(k, [None, cols])
        sch.reorder(kp, r, s, g, kk, t)
        if parallel:
            sch.parallel(kp)
    if parallel:
        _parallel_blocks(sch, (jo, n, yy), found["C"].shape)
        blocks = {b.name for b in sch.blocks()}
        for name in ("X_g", "A_sum"):
            if name in blocks:
                sch.parallel(sch.get_loops(name)[1])
    roll_padded_groups(sch)
    return sch


def _plain_copy(sch: Schedule, block: str) -> bool:
    """Whether ``block`` (``X_g[n, y, x, g, t]``) only copies an input whose channels are
    its last axis (no padding, conversion or zero channels: an NHWC input of whole channel
    groups, read with ``g`` and ``t`` in its last index only); the tiles then read the input
    itself."""
    stmt = next(st for st in sch.program.statements if st.block_name == block)
    value = stmt.value
    if not isinstance(value, Load) or sch.program.buffer(value.buffer).role \
            is not BufferRole.INPUT:
        return False
    groups = set(stmt.iters[-2:])
    used = [{v.name for v in walk(i) if isinstance(v, Var)} for i in value.indices]
    return groups <= used[-1] and not any(groups & u for u in used[:-1])


def _parallel_blocks(sch: Schedule, loops: tuple, extents: tuple) -> None:
    """The blocks of panels, images and output rows (``jo > n > y``) as one parallel loop
    where their extents are constants: one fork per layer (the threads wake once, and a
    7-row image on 2 threads does not leave one idle for a seventh of every block);
    else the rows in parallel in each block."""
    if all(isinstance(d, Const) for d in (extents[0], extents[1], extents[3])):
        sch.parallel(sch.fuse(*loops))
    else:
        sch.parallel(loops[2])


def _epilogue_then_copy(sch: Schedule, write_back, ji, out: str) -> None:
    """The tile's epilogue ``E`` computed from the local sums pixel-major (output channels
    innermost: contiguous in the sums and the per-channel terms, vector code), then copied
    into the output's layout and dtype, both at the tile."""
    sch.reverse_compute_inline(sch.get_block("E"))
    sch.reverse_compute_at(write_back, ji)
    *_, last = sch.get_loops(write_back)
    sch.vectorize(last)
    sch.reverse_compute_at(sch.get_block(out), ji)


def _window_weights(found: dict[str, Tensor]) -> str | None:
    """``W_g``, or the packed weights C reads (a 6-D placeholder), or None."""
    if "W_g" in found:
        return "W_g"
    if "C" not in found:
        return None
    return next((t.name for t in found["C"].inputs if t.is_placeholder and t.ndim == 6), None)
