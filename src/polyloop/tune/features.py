# SPDX-License-Identifier: Apache-2.0
"""Features of a scheduled program for the cost model: a fixed-length vector per schedule.

Per loop of the schedule tree (depth first, the first ``MAX_LOOPS``): its depth, the log of
its trip count (exact, from isl's value range; -1 when symbolic), its kind, its unroll factor
and the number of statements below it; then the loop count, the parallel loop count and the
statement count (inlining and caching change it); then, for the deepest stores of the scheduled
loop nest, the stride in elements of each access along the innermost loop around it (0: the
loop reuses the element; 1: contiguous, vectorizes) and whether that loop is vectorized;
then, per loop again, its exact footprint from isl (``poly.footprints``): the distinct elements
of each argument buffer one iteration touches, the bytes of all buffers and of the temporaries
(packed operands, local tiles) it touches, its statement instances, and its arithmetic
intensity (flops per byte touched), all as log2(1 + x) (-1 when not countable); last, per
cache level (this machine's L1 and L2, and a 32 MiB last level), the bytes the schedule brings
into a cache of that size by ``poly.footprints.cache_traffic`` and the flops per such byte.
Vectors of different schedules of one program line up position by position.

>>> import polyloop as pl
>>> from polyloop.tune.features import features
>>> A = pl.placeholder((8, 8), name="A")
>>> B = pl.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
>>> len(features(pl.Schedule(B))) == len(features(pl.Schedule(B)))
True
"""
from __future__ import annotations

import math

from ..errors import PolyloopError
from ..ir.dtypes import DType
from ..ir.expr import Const, Expr, loads, substitute
from ..ir.loops import Block, For, If, LoopKind, Node, Store
from ..ir.shapes import evaluate
from ..poly import affine
from ..poly.count import instance_flops, statement_instances
from ..poly.footprints import LoopFootprint, cache_traffic, loop_footprints
from ..poly.tree import LoopNode, Root, statements_under
from ..schedule import Schedule
from ..schedule.auto_common import cache_sizes

MAX_LOOPS = 24
KINDS = tuple(LoopKind)
PER_LOOP = 4 + len(KINDS)
MAX_STORES = 3           # the deepest stores described
MAX_ACCESSES = 4         # accesses per store (the store first)
OTHER_LOOPS = 3          # the value of the outer loop variables when a stride is measured
MAX_BUFFERS = 4          # argument buffers whose footprint per loop is a feature of its own
PER_FOOTPRINT = MAX_BUFFERS + 4
DEFAULT_SIZE = 128       # a size parameter's value when not given
LAST_LEVEL = 32 << 20    # bytes of the last-level cache assumed


def features(sch: Schedule, sizes: dict[str, int] | None = None) -> list[float]:
    """The feature vector of ``sch`` (length ``MAX_LOOPS * (PER_LOOP + PER_FOOTPRINT) + 3 +
    MAX_STORES * (MAX_ACCESSES + 2) + 6``); ``sizes`` binds the size parameters (128 when not
    given)."""
    groups = feature_groups(sch, sizes)
    return [x for g in groups.values() for x in g]


def feature_groups(sch: Schedule, sizes: dict[str, int] | None = None
                   ) -> dict[str, list[float]]:
    """The features of ``sch`` by kind: ``"loops"``, ``"strides"``, ``"footprints"`` and
    ``"traffic"`` (``features`` is their concatenation, in this order).

    >>> import polyloop as pl
    >>> A = pl.placeholder((8, 8), name="A")
    >>> B = pl.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    >>> list(feature_groups(pl.Schedule(B)))
    ['loops', 'strides', 'footprints', 'traffic']
    """
    sizes = sizes or {}
    env = {p: sizes.get(p, DEFAULT_SIZE) for p in sch.program.params}
    counted = loop_footprints(sch.program, sch.state.root, env, MAX_LOOPS)
    return {"loops": _tree_features(sch), "strides": _stride_features(sch, sizes),
            "footprints": _footprint_features(sch, counted),
            "traffic": _traffic_features(sch, env, counted)}


def _traffic_features(sch: Schedule, env: dict[str, int], counted: list[LoopFootprint]
                      ) -> list[float]:
    moved = cache_traffic(sch.program, sch.state.root, env, (*cache_sizes(), LAST_LEVEL),
                          counted)
    flops = 0
    for s in sch.program.statements:
        n = statement_instances(sch.program, s.name, env)
        flops += (n or 0) * instance_flops(s)
    out = []
    for m in moved:
        out += [_log(m), _log(flops / m if m else None)]
    return out


def _footprint_features(sch: Schedule, counted: list[LoopFootprint]) -> list[float]:
    args = [b.name for b in sch.program.arg_buffers()][:MAX_BUFFERS]
    rows = [_footprint_row(sch, fp, args) for fp in counted]
    flat = [x for row in rows for x in row]
    return flat + [0.0] * (MAX_LOOPS * PER_FOOTPRINT - len(flat))


def _footprint_row(sch: Schedule, fp: LoopFootprint, args: list[str]) -> list[float]:
    row = [_log(fp.elements.get(b, 0)) for b in args] + [-1.0] * (MAX_BUFFERS - len(args))
    counted = [(b, n) for b, n in fp.elements.items() if n is not None]
    nbytes = sum(n * sch.program.buffer(b).dtype.itemsize for b, n in counted)
    temps = sum(n * sch.program.buffer(b).dtype.itemsize for b, n in counted
                if b not in args and sch.program.has_buffer(b))
    exact = len(counted) == len(fp.elements)
    intensity = (fp.flops / nbytes if exact and fp.flops is not None and nbytes else None)
    return row + [_log(nbytes if exact else None), _log(temps), _log(fp.instances),
                  _log(intensity)]


def _log(x: float | None) -> float:
    return -1.0 if x is None else math.log2(1.0 + x)


def _tree_features(sch: Schedule) -> list[float]:
    rows: list[list[float]] = []
    _walk(sch, sch.state.root, 0, rows)
    flat = [x for row in rows[:MAX_LOOPS] for x in row]
    flat += [0.0] * (MAX_LOOPS * PER_LOOP - len(flat))
    kinds = [n.kind for n in _loops(sch.state.root)]
    return flat + [float(len(rows)), float(kinds.count(LoopKind.PARALLEL)),
                   float(len(sch.program.statements))]


def _loops(node: Root | LoopNode):
    for c in node.children:
        if isinstance(c, LoopNode):
            yield c
            yield from _loops(c)


def _walk(sch: Schedule, node: Root | LoopNode, depth: int, rows: list[list[float]]) -> None:
    for c in node.children:
        if not isinstance(c, LoopNode):
            continue
        rows.append([float(depth), _log_extent(sch, c),
                     float(c.unroll_factor or 0), float(len(statements_under(c)))]
                    + [1.0 if c.kind is k else 0.0 for k in KINDS])
        _walk(sch, c, depth + 1, rows)


def _log_extent(sch: Schedule, node: LoopNode) -> float:
    stmt, expr = node.exprs[0]
    lo, hi = affine.value_range(sch.program, stmt, expr)
    if lo is None or hi is None:
        return -1.0
    return math.log2(hi - lo + 2)


def _stride_features(sch: Schedule, sizes: dict[str, int]) -> list[float]:
    env = {p: sizes.get(p, 128) for p in sch.program.params}
    stores: list[tuple[int, Store, list[For]]] = []
    _stores(sch.loop_ast(), [], stores)
    stores.sort(key=lambda t: -t[0])
    out: list[float] = []
    for _, store, loops in stores[:MAX_STORES]:
        inner = loops[-1] if loops else None
        accesses = [(store.buffer, store.indices)] + [(ld.buffer, ld.indices)
                                                      for ld in loads(store.value)]
        row = [_log_stride(sch, b, ix, inner, loops, env) for b, ix in accesses[:MAX_ACCESSES]]
        row += [-1.0] * (MAX_ACCESSES - len(row))
        row += [float(len(loops)),
                1.0 if inner is not None and inner.kind is LoopKind.VECTORIZED else 0.0]
        out += row
    return out + [-1.0] * (MAX_STORES * (MAX_ACCESSES + 2) - len(out))


def _stores(node: Node, loops: list[For], out: list) -> None:
    if isinstance(node, Store):
        out.append((len(loops), node, list(loops)))
    elif isinstance(node, For):
        _stores(node.body, loops + [node], out)
    elif isinstance(node, If):
        _stores(node.then, loops, out)
        if node.otherwise is not None:
            _stores(node.otherwise, loops, out)
    elif isinstance(node, Block):
        for child in node.body:
            _stores(child, loops, out)


def _log_stride(sch: Schedule, buffer: str, indices: tuple[Expr, ...], inner: For | None,
                loops: list[For], env: dict[str, int]) -> float:
    """log2(1 + |elements between the accesses of two successive iterations of ``inner``|)
    (-1 when it cannot be evaluated)."""
    if inner is None or not sch.program.has_buffer(buffer):
        return -1.0
    try:
        shape = [evaluate(d, env) for d in sch.program.buffer(buffer).shape]
        at = [_address(indices, shape, loops, inner, env, v) for v in (0, 1)]
    except (PolyloopError, ZeroDivisionError, TypeError, KeyError):
        return -1.0
    return math.log2(1 + abs(at[1] - at[0]))


def _address(indices: tuple[Expr, ...], shape: list[int], loops: list[For], inner: For,
             env: dict[str, int], value: int) -> int:
    values = {f.var: Const(value if f is inner else OTHER_LOOPS, DType.INT64) for f in loops}
    address = 0
    for e, extent in zip(indices, shape):
        address = address * extent + evaluate(substitute(e, values), env)
    return address
