# SPDX-License-Identifier: Apache-2.0
"""Double buffering: a 'shared' or 'local' temporary stored as two boxes that alternate along
its home loop, so that one iteration can fill the next box while the current one is read.

A temporary such as a prefetch copy ``a_fetch[io, jo, ko, x, y]`` has one dimension ``d``
whose index follows the home loop ``L`` (here ``ko``): at every access, ``index_d = L + c``
with a constant ``c`` (0 where the copy is used, 1 for a copy issued one iteration early by
``shift``). Then the elements of one value ``v`` of ``index_d`` are accessed only in the
iterations ``v - max(c) .. v - min(c)`` of ``L``, and when ``max(c) - min(c) <= 1`` the
elements of ``v`` and ``v + 2`` are never alive at once: they can share a box, element
``[v % 2, box position]``. Everything here is exact (isl): each ``c`` is proven constant, and
the box position comes from the ordinary compaction keyed on (the loops outside ``L``,
``index_d``), which also proves that no value passes between those keys.

>>> # double_buffered(program, root, "a_fetch") -> Compaction(stages=2, ...) or a reason
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from ..ir.loops import LoopKind
from ..ir.program import MemScope, Program
from .access import accesses
from .affine import prefix_map
from .gpu import is_item, statement_paths
from .isl_util import out_dims
from .storage import Compaction, compact_with_keys
from .tree import LoopNode, Root

STAGES = 2


@dataclass(frozen=True, slots=True)
class Rotation:
    """The home loop, the buffer dimension that follows it, and per statement the constant
    ``c`` of ``index_d = loop value + c`` (the same for all its accesses)."""
    loop: LoopNode
    dim: int
    lead: dict[str, int]
    writers: frozenset[str]


def _align(a, b):
    return a.align_params(b.get_space())


def _constant(m: isl.Map) -> int | None:
    """The value of a map ``S[...] -> [x]`` when it is one integer on its whole domain."""
    r = m.range()
    if r.is_empty():
        return None
    r = r.project_out(isl.dim_type.param, 0, r.dim(isl.dim_type.param))
    if not r.is_singleton():
        return None
    return r.sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()


def _home(program: Program, root: Root, buffer: str, stmts: list[str]) -> LoopNode | str:
    paths = statement_paths(root)
    common = paths[stmts[0]]
    for s in stmts[1:]:
        k = 0
        while k < min(len(common), len(paths[s])) and common[k].id == paths[s][k].id:
            k += 1
        common = common[:k]
    cut = next((k for k, n in enumerate(common) if is_item(n)), len(common))
    common = common[:cut]
    if not common:
        return f"no loop outside the work-item loops encloses every access of '{buffer}'"
    home = common[-1]
    if home.thread is not None or home.kind in (LoopKind.PARALLEL, LoopKind.VECTORIZED):
        return (f"its home loop '{home.name}' is {home.thread or home.kind.value}: two copies "
                "alternate only along a loop that runs its iterations in order")
    return home


def rotation(program: Program, root: Root, buffer: str) -> Rotation | str:
    """How ``buffer`` can rotate through two boxes along its home loop, or why it cannot."""
    buf = program.buffer(buffer)
    if buf.scope is MemScope.GLOBAL:
        return f"'{buffer}' is in global memory; double buffering is for 'shared' or 'local'"
    acc = [a for a in accesses(program) if a.buffer == buffer]
    if not acc or not all(a.exact for a in acc):
        return f"'{buffer}' is never accessed" if not acc else "an index is not affine"
    stmts = list(dict.fromkeys(a.statement for a in acc))
    home = _home(program, root, buffer, stmts)
    if isinstance(home, str):
        return home
    for d in range(buf.ndim):
        lead: dict[str, int] = {}
        for a in acc:
            value = prefix_map(program, a.statement, [home.expr(a.statement)])
            index = out_dims(a.relation, d).reset_tuple_id(isl.dim_type.out)
            c = _constant(_align(index, value).sum(_align(value, index).neg()))
            if c is None or lead.setdefault(a.statement, c) != c:
                break
        else:
            writers = frozenset(a.statement for a in acc if a.is_write)
            return Rotation(home, d, lead, writers)
    return (f"no dimension of '{buffer}' is indexed by the value of its home loop "
            f"'{home.name}' plus a constant at every access (each statement one constant)")


def overlap(rot: Rotation) -> tuple[str, str, int] | None:
    """(first, last, distance): the statements whose accesses of one element are furthest
    apart along the loop (the first a writer where one is that early), when they are more
    than one iteration apart (two boxes are then too few)."""
    def early(s: str) -> tuple[int, bool]:
        return rot.lead[s], s in rot.writers
    first = max(rot.lead, key=early)
    last = min(rot.lead, key=lambda s: rot.lead[s])
    span = rot.lead[first] - rot.lead[last]
    return (first, last, span) if span >= STAGES else None


def double_buffered(program: Program, root: Root, buffer: str) -> Compaction | str:
    """The compaction of ``buffer`` into two alternating boxes along its home loop, or why
    there is none: the ordinary compaction keyed on (the loops outside the home loop, the
    rotating index), with ``stages`` 2 and the rotating dimension recorded."""
    rot = rotation(program, root, buffer)
    if isinstance(rot, str):
        return rot
    far = overlap(rot)
    if far is not None:
        return (f"an element of '{buffer}' is accessed by '{far[0]}' {far[2]} iterations of "
                f"loop '{rot.loop.name}' before '{far[1]}' reads it; two copies hold only "
                "consecutive iterations")
    paths = statement_paths(root)
    keys = {}
    scope = program.buffer(buffer).scope
    for s in rot.lead:
        pos = [n.id for n in paths[s]].index(rot.loop.id)
        outer = paths[s][:pos]
        if scope is MemScope.LOCAL:     # a work-item's private memory: its own boxes
            outer += sorted((n for n in paths[s][pos + 1:] if is_item(n)),
                            key=lambda n: n.thread.value)
        index = [a for a in accesses(program) if a.statement == s and a.buffer == buffer][0]
        own = out_dims(index.relation, rot.dim).reset_tuple_id(isl.dim_type.out)
        if outer:
            key = prefix_map(program, s, [n.expr(s) for n in outer])
            own = _align(key, own).flat_range_product(_align(own, key))
        keys[s] = own.reset_tuple_id(isl.dim_type.out)
    result = compact_with_keys(program, root, buffer, keys, rot.loop.name)
    if isinstance(result, str):
        return result
    return replace(result, stages=STAGES, rotating=rot.dim)
