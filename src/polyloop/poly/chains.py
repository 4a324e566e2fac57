# SPDX-License-Identifier: Apache-2.0
"""Perfectly nested tiled loops become one isl band before the AST is built.

``astgen`` gives isl one single-member band per loop, each under a mark ``L<id>``. That is
cheap for affine loops, but isl's AST generation of a band whose value has more integer
divisions than the band has members can blow up. The wavefront of a time-tiled stencil is the
case that hurts: ``floor(t/32) + floor((2t + i)/32)`` alone in its band leaves one division
that no loop of the band fixes, so while isl builds that loop (and the ones below, whose build
domain inherits it) the set it works on keeps an existentially quantified variable; isl's
stride detection (``isl_ast_build_detect_strides``) then computes that set's affine hull by
integer sampling with generalized basis reduction, and its cost grows with the tile size
(printing Jacobi-1D on a quiet core: 0.4 s with tile 16, 4 s with tile 32, over two minutes
with tile 64). In one band with the time-tile loop ``floor(t/32)`` every division equals a
combination of band members and isl eliminates them all: the same print takes 0.06 s, with
the same loops.

``join_chains`` therefore merges each chain of perfectly nested single-member bands whose
values divide (a tiled band) into one band, with the chain's marks stacked above it in order;
``astgen`` matches each generated ``for`` to its mark by depth. Chains without divisions are
left alone (nothing to gain), and so are bands that carry AST build options or have such a
band below them (full-tile isolation, ``poly.isolate``: a time-tiled chain with an unrolled or
vectorized tile keeps one band per loop and builds slowly; ``isolate=off`` on the tile avoids
it) and fused loops built from their parts (``Collapse``), whose code generation needs their
band on its own.
"""
from __future__ import annotations

import islpy as isl

from .tree import Root, loops


def join_chains(schedule: isl.Schedule, root: Root) -> isl.Schedule:
    """``schedule`` (``isl_schedule.isl_schedule`` of ``root``: a mark ``L<id>`` above each loop's
    band) with each chain of tiled loops as one band under its stacked marks.

    >>> import islpy as isl, polyloop as pl
    >>> from polyloop.poly.hardware_ids import statement_domains
    >>> from polyloop.poly.isl_schedule import isl_schedule
    >>> A = pl.placeholder((64,), "float32", name="A")
    >>> B = pl.compute((64,), lambda i: A[i] + 1.0, name="B")
    >>> sch = pl.Schedule(B)
    >>> _ = sch.split(sch.get_loops("B")[0], factors=[None, 8])
    >>> program, root = sch.program, sch.state.root
    >>> tree = join_chains(isl_schedule(program, root, statement_domains(program, root, {})), root)
    >>> "mark" in str(tree) and tree.get_root().child(0).child(0).child(0).band_n_member()
    2
    """
    alone = frozenset(n.id for n in loops(root) if n.collapse is not None)

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        found = _joinable_child(node, alone)
        if found is None or not (_divides(node) or _divides(found[1])):
            return node
        marks, inner = found
        rows = node.band_get_partial_schedule().flat_range_product(
            inner.band_get_partial_schedule())
        at = inner.delete()
        for _ in marks:                                  # the inner band's marks
            at = at.parent().delete()
        at = at.parent().delete().insert_partial_schedule(rows)   # the outer band
        for mark in reversed(marks):
            at = at.insert_mark(mark)
        return at
    return schedule.map_schedule_node_bottom_up(visit)


def _joinable_child(node: isl.ScheduleNode, alone: frozenset[int]
                    ) -> tuple[list[isl.Id], isl.ScheduleNode] | None:
    """The marks and the band directly below ``node`` when the two bands may become one:
    ``node`` is a single-member band under a loop's mark, and neither carries build options
    nor belongs to a loop that must keep its band."""
    if not _plain_band(node, alone, single=True):
        return None
    marks, at = [], node.child(0)
    while at.get_type() == isl.schedule_node_type.mark and at.n_children() == 1:
        marks.append(at.mark_get_id())
        at = at.child(0)
    # a band whose subtree depends on its position (an isolated tile below) cannot move
    if not marks or not _plain_band(at, alone, single=False) or at.is_subtree_anchored():
        return None
    return marks, at


def _plain_band(node: isl.ScheduleNode, alone: frozenset[int], *, single: bool) -> bool:
    if node.get_type() != isl.schedule_node_type.band or not node.has_parent():
        return False
    if single and node.band_n_member() != 1:
        return False
    parent = node.parent()
    if parent.get_type() != isl.schedule_node_type.mark:
        return False
    name = parent.mark_get_id().get_name()
    if not (name.startswith("L") and name[1:].isdigit()) or int(name[1:]) in alone:
        return False
    return node.band_get_ast_build_options().is_empty()


def _divides(band: isl.ScheduleNode) -> bool:
    """Does some member of the band take an integer division of the iterators?"""
    found = []

    def check(bmap: isl.BasicMap) -> None:
        found.append(bmap.dim(isl.dim_type.div) > 0)
    band.band_get_partial_schedule_union_map().foreach_map(
        lambda m: m.foreach_basic_map(check))
    return any(found)
