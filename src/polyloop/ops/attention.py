# SPDX-License-Identifier: Apache-2.0
"""Scaled dot-product attention and its CPU schedule (register tiles per head).

``attention(q, k, v)`` for ``q: (..., S, E)``, ``k: (..., L, E)``, ``v: (..., L, Ev)`` (the
same leading batch axes, e.g. batch and heads; the batch may be a ``pl.var``) is computed in
stages named after the result:

- ``<name>_qk[..., j, i] = sum_d k[..., j, d] * q[..., i, d]`` — the raw scores, stored
  transposed (a query's scores down a column) so that every softmax pass runs along
  contiguous vectors of queries;
- ``<name>_max[..., i]`` — each query's maximum score (``causal``: over ``j <= i`` only);
- ``<name>_exp[..., j, i] = exp((qk - max) * scale)`` (0 where ``causal`` masks ``j > i``);
- ``<name>_sum[..., i]`` — each query's sum of exponentials;
- ``<name>_pv[..., i, e] = sum_j exp[..., j, i] * v[..., j, e]`` — the unnormalised result;
- ``<name>[..., i, e] = pv / sum`` — one division per element of the result, not per score.

The schedule: the heads run in parallel, every stage of a head in the head's iteration. Both
products accumulate ``mr x nr`` tiles in registers (``cache_write "local"``): for the scores,
q is packed per head into panels of ``nr`` queries contiguous along d; for the product with v,
v's rows are already contiguous along e and are read in place. The maximum, the exponentials and
the sum run over rows of keys with the queries as vector lanes (no horizontal reductions, sums
in the keys' order); the division by the sum is applied as each tile is written back.

>>> import numpy as np, polyloop as pl
>>> from polyloop.ops import attention, schedule_attention
>>> q = pl.placeholder((2, 37, 16), name="q"); k = pl.placeholder((2, 37, 16), name="k")
>>> v = pl.placeholder((2, 37, 16), name="v")
>>> mod = pl.build(schedule_attention(attention(q, k, v)))
>>> x = np.ones((2, 37, 16), "float32")
>>> float(mod(x, x, x)[1, 36, 15])
1.0
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.elementwise import exp, where
from ..ir.expr import Const, Load, walk
from ..schedule import Schedule
from .knobs import check_knobs, default_lanes

# The value masked scores take in the row maximum: the lowest finite float32 (a causal row
# always keeps its diagonal, so the maximum is never this value).
LOWEST = -3.4028234663852886e38
SUFFIXES = ("_qk", "_max", "_exp", "_sum", "_pv")


def attention(q: Tensor, k: Tensor, v: Tensor, *, scale: float | None = None,
              causal: bool = False, name: str = "attention") -> Tensor:
    """``softmax(q @ k^T * scale) @ v`` over the two last axes (see the module docstring);
    ``scale`` defaults to ``1 / sqrt(E)``, ``causal`` masks the scores with ``j > i``.

    >>> import polyloop as pl
    >>> q = pl.placeholder((3, 5, 8), name="q")
    >>> attention(q, q, pl.placeholder((3, 5, 4), name="v"))
    Tensor(attention: float32[3, 5, 4])
    """
    _check_operands(q, k, v)
    e_dim = q.shape[-1]
    if scale is None:
        if not isinstance(e_dim, Const):
            raise ScheduleError(f"attention: the head size of {q!r} is symbolic; pass scale= "
                                "explicitly")
        scale = 1.0 / float(e_dim.value) ** 0.5
    lead, rows, cols = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2]
    d = te.reduce_axis((0, e_dim), name="rd")
    # i[-2] is the key j, i[-1] the query
    qk = te.compute(lead + (cols, rows), lambda *i: te.sum(
        k[i[:-1] + (d,)] * q[i[:-2] + (i[-1], d)], axis=d), name=f"{name}_qk")

    def masked(key, query, value, fill):
        return where(key > query, fill, value) if causal else value
    r1 = te.reduce_axis((0, cols), name="rj")
    mx = te.compute(lead + (rows,), lambda *i: te.max(masked(
        r1, i[-1], qk[i[:-1] + (r1, i[-1])], LOWEST), axis=r1), name=f"{name}_max")
    ex = te.compute(qk.shape, lambda *i: masked(i[-2], i[-1], exp(
        (qk[i] - mx[i[:-2] + (i[-1],)]) * float(scale)), 0.0), name=f"{name}_exp")
    r2 = te.reduce_axis((0, cols), name="rj")
    total = te.compute(mx.shape, lambda *i: te.sum(ex[i[:-1] + (r2, i[-1])], axis=r2),
                       name=f"{name}_sum")
    r3 = te.reduce_axis((0, cols), name="rj")
    out_shape = lead + (rows, v.shape[-1])
    pv = te.compute(out_shape, lambda *i: te.sum(
        ex[i[:-2] + (r3, i[-2])] * v[i[:-2] + (r3, i[-1])], axis=r3), name=f"{name}_pv")
    return te.compute(out_shape, lambda *i: pv[i] / total[i[:-1]], name=name)


def _check_operands(q: Tensor, k: Tensor, v: Tensor) -> None:
    for label, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.ndim < 2:
            raise ScheduleError(f"attention: {label} must be a tensor of at least 2 axes, "
                                f"got {t!r}")
    if not (q.ndim == k.ndim == v.ndim):
        raise ScheduleError(f"attention: q, k and v must have the same number of axes, got "
                            f"{q!r}, {k!r}, {v!r}")
    same = [str(a) == str(b) == str(c) for a, b, c in zip(q.shape[:-2], k.shape[:-2],
                                                          v.shape[:-2])]
    if not all(same) or str(q.shape[-1]) != str(k.shape[-1]) \
            or str(k.shape[-2]) != str(v.shape[-2]):
        raise ScheduleError(f"attention: shapes do not match: q {q!r}, k {k!r}, v {v!r}; "
                            "expected (..., S, E), (..., L, E) and (..., L, Ev) with the same "
                            "leading axes (broadcast them first)")


def schedule_attention(out: Tensor, *, mr: int = 6, nr_vectors: int = 4,
                       lanes: int | None = None, per_head: bool = True) -> Schedule:
    """The register-tile schedule of ``out = attention(q, k, v)`` (see the module docstring);
    q, k and v need at least one batch axis (the heads). ``mr`` x ``nr_vectors * lanes`` is
    the register tile of both products; ``lanes`` defaults to the host's float32 vector width.
    ``per_head``: every stage of a head runs in one iteration of the parallel loop (one
    parallel region, the head's scores still in cache for the next pass); when the
    dependences refuse it (a symbolic size that may be 0) or with ``per_head=False``, each
    stage is a parallel nest of its own.

    >>> import polyloop as pl
    >>> q = pl.placeholder((4, 37, 16), name="q")
    >>> sch = schedule_attention(attention(q, q, q), lanes=8)
    >>> [loop.name for loop in sch.get_loops("attention_pv")][:3]
    ['i0', 'i2_0', 'i1_0']
    """
    lanes = default_lanes(str(out.dtype)) if lanes is None else lanes
    check_knobs("schedule_attention", mr=mr, nr_vectors=nr_vectors, lanes=lanes)
    q_name = _query_name(out)
    tile = (mr, nr_vectors, lanes)
    if per_head:
        try:
            return _per_head(out, q_name, tile)
        except ScheduleError:
            pass    # each stage apart is legal for any sizes
    return _stage_by_stage(out, q_name, tile)


def _query_panels(sch: Schedule, out: Tensor, q_name: str, nr: int) -> None:
    """q packed into panels of ``nr`` queries, contiguous along the head size."""
    sch.transform_layout(f"{out.name}_qk", q_name,
                         lambda *i: i[:-2] + (i[-2] // nr, i[-1], i[-2] % nr))


def _per_head(out: Tensor, q_name: str, tile: tuple[int, int, int]) -> Schedule:
    """Every stage computed in the iteration of the result's parallel head loop."""
    name, (_, nr_vectors, lanes) = out.name, tile
    sch = Schedule(out)
    _query_panels(sch, out, q_name, nr_vectors * lanes)
    scores = sch.cache_write(f"{name}_qk", "local")
    result = sch.cache_write(f"{name}_pv", "local")
    head = _parallel_head(sch, f"{name}_pv", out)
    i0 = _tile_loops(sch, f"{name}_pv", tile)
    sch.reverse_compute_inline(sch.get_block(name))
    sch.reverse_compute_at(result, i0)
    # consumers first: each producer then has its consumers' head loop to move into
    for block in (f"{name}_sum", f"{name}_exp", f"{name}_max", scores, f"{name}_qk",
                  f"{q_name}_packed_in"):
        sch.compute_at(block, head)
    sch.reverse_compute_at(scores, _tile_loops(sch, f"{name}_qk", tile))
    _row_loops(sch, f"{name}_max", reduction=True)
    _row_loops(sch, f"{name}_sum", reduction=True)
    _row_loops(sch, f"{name}_exp", reduction=False)
    return sch


def _stage_by_stage(out: Tensor, q_name: str, tile: tuple[int, int, int]) -> Schedule:
    """Each stage a nest of its own, parallel over the heads."""
    name, (_, nr_vectors, lanes) = out.name, tile
    sch = Schedule(out)
    _query_panels(sch, out, q_name, nr_vectors * lanes)
    for block, epilogue in ((f"{name}_qk", None), (f"{name}_pv", name)):
        local = sch.cache_write(block, "local")
        head = _parallel_head(sch, block, out)
        i0 = _tile_loops(sch, block, tile)
        if epilogue is not None:
            sch.reverse_compute_inline(sch.get_block(epilogue))
        sch.reverse_compute_at(local, i0)
        if epilogue is None:
            try:    # pack per head unless a symbolic row count may leave a head reading none
                sch.compute_at(f"{q_name}_packed_in", head)
            except ScheduleError:
                pass
    for stage, reduction in (("_max", True), ("_exp", False), ("_sum", True)):
        _parallel_head(sch, f"{name}{stage}", out)
        _row_loops(sch, f"{name}{stage}", reduction=reduction)
    return sch


def _query_name(out: Tensor) -> str:
    """The name of q in the attention whose result is ``out`` (its stages checked by name)."""
    pv = out.inputs[0] if isinstance(out, Tensor) and out.inputs else None
    qk = pv.inputs[0].inputs[0] if pv is not None and pv.inputs and pv.inputs[0].inputs else None
    if pv is None or pv.name != f"{out.name}_pv" or qk is None or qk.name != f"{out.name}_qk":
        raise ScheduleError(f"schedule_attention: expected the result of attention(q, k, v), "
                            f"got {out!r}")
    if out.ndim < 3 or not all(t.is_placeholder for t in (*qk.inputs, *pv.inputs[1:])):
        raise ScheduleError(f"schedule_attention: {out!r} needs q, k and v as placeholders "
                            "with at least one batch axis (the heads)")
    # the scores read k, then q (a self-attention may pass one tensor as both)
    loads = [e for e in walk(qk.body) if isinstance(e, Load)]
    return loads[-1].buffer


def _parallel_head(sch: Schedule, block: str, out: Tensor):
    """Parallelise the block's batch loop of largest constant extent (the heads, when the
    batch is 1 or symbolic), else its first; returns it. Batch loops are not fused: a fused
    loop's division and modulo would keep the register tiles from constant-bound nests."""
    n_batch = out.ndim - 2
    sizes = [d.value if isinstance(d, Const) else 0 for d in out.shape[:n_batch]]
    head = sch.get_loops(block)[max(range(n_batch), key=lambda a: (sizes[a], -a))]
    sch.parallel(head)
    return head


def _tile_loops(sch: Schedule, block: str, tile: tuple[int, int, int]):
    """The block's three last loops ``i, j, r`` (``block[.., i, j] = sum_r ...``, written to a
    tile-local buffer) as ``mr x nr`` register tiles: ``j0, i0, r, i1 (unrolled), j1
    (unrolled), j2 (vector)``, initialised before ``r``; returns ``i0``."""
    mr, nr_vectors, lanes = tile
    i, j, r = sch.get_loops(block)[-3:]
    i0, i1 = sch.split(i, factors=[None, mr])
    j0, j1, j2 = sch.split(j, factors=[None, nr_vectors, lanes])
    sch.reorder(j0, i0, r, i1, j1, j2)
    sch.unroll(i1)
    sch.unroll(j1)
    sch.vectorize(j2)
    sch.decompose_reduction(block, r)
    return i0


def _row_loops(sch: Schedule, block: str, *, reduction: bool) -> None:
    """The block's two last loops as a pass over keys with the queries as vector lanes: a
    reduction's loops ``(query, key)`` become ``key, query`` (each query accumulates in its
    own lane), initialised before the key loop."""
    a, b = sch.get_loops(block)[-2:]
    if reduction:
        sch.reorder(b, a)
        sch.decompose_reduction(block, b)
    sch.vectorize(sch.get_loops(block)[-1])
