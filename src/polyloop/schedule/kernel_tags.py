# SPDX-License-Identifier: Apache-2.0
"""Loop tags of kernels (``g.N``, ``l.N``, ``unr``, ``vec``, ``ilp``, ``for``) and the working
state of the kernel transformations.

A kernel keeps two things for its transformations (opaque to the front end): the schedule the
loop primitives work on (``plain``, without loop kinds) and its tags by loop id. Each tag is
checked when it is given (a parallel one must carry no dependence, as ``Schedule.bind``
checks); the tagged schedule (``schedule``) is the plain one with the kinds set, and
``schedule_of`` verifies all of it once more, exactly as ``Schedule`` does after every
primitive, before it is built. Keeping the kinds out of the plain schedule means the
primitives do not re-check every parallel loop each time: that is most of the cost of code
generation.

Kernels are duck-typed here (``program``, ``schedule``, ``plain``, ``tags``, ``history``): the
kernel class belongs to the front end, a sibling layer this package does not import.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..ir.program import Program
from ..ir.thread_axis import AxisLevel, ThreadAxis
from ..poly.tree import LoopNode, loops
from . import loops as loops_mod
from . import state as st
from . import verdicts as vd
from ..poly import tree_edits
from .schedule import Schedule
from .trace import LoopHandle, Trace



class TagKind(enum.Enum):
    GROUP = "g"          # a work-group index (blockIdx)
    LOCAL = "l"          # a work-item index within the group (threadIdx)
    UNROLL = "unr"
    VECTOR = "vec"
    ILP = "ilp"          # instruction-level parallelism: unrolled
    SERIAL = "for"


@dataclass(frozen=True, slots=True)
class Tag:
    kind: TagKind
    axis: int = 0

    def __str__(self) -> str:
        return f"{self.kind.value}.{self.axis}" if self.kind in HARDWARE else self.kind.value


HARDWARE = (TagKind.GROUP, TagKind.LOCAL)
VALID_TAGS = ("g.0", "g.1", "g.2", "l.0", "l.1", "l.2", "unr", "vec", "ilp", "for")


def parse_tag(text: str | Tag, iname: str = "") -> Tag:
    """``"g.0"`` -> Tag(GROUP, 0); the spelling is checked once, here."""
    if isinstance(text, Tag):
        return text
    t = str(text).strip()
    if t in ("ilp.unr",):
        t = "ilp"
    if t in ("ilp.seq", "seq"):
        t = "for"
    for kind in TagKind:
        if t == kind.value:
            return Tag(kind)
    head, _, axis = t.partition(".")
    if head in ("g", "l") and axis.isdigit() and int(axis) < 3:
        return Tag(TagKind(head), int(axis))
    where = f" for iname '{iname}'" if iname else ""
    raise ScheduleError(f"unknown tag {text!r}{where}; valid tags: {', '.join(VALID_TAGS)}")


def thread_name(tag: Tag) -> ThreadAxis:
    """The GPU axis of a ``g.N`` or ``l.N`` tag."""
    level = AxisLevel.GROUP if tag.kind is TagKind.GROUP else AxisLevel.ITEM
    return ThreadAxis.of(level, tag.axis)


# the working state ---------------------------------------------------------------------------

def with_state(sch: Schedule | None, state: st.State, origin: Program | None = None) -> Schedule:
    # Built like Schedule.copy(): renaming a loop or setting kinds in bulk is no primitive,
    # and the Schedule class has no constructor from a state.
    out = Schedule.__new__(Schedule)
    out._state = state
    out._origin = origin if origin is not None else sch.original  # type: ignore[union-attr]
    out.trace = sch.trace if sch is not None else Trace()
    return out


@dataclass
class Work:
    """A transformation in progress: the plain schedule and the tags by loop id."""
    sch: Schedule
    tags: dict[int, Tag]

    def rank(self, n: LoopNode) -> int:
        """0 for work-group loops, 1 for work-item loops, 2 for the others."""
        tag = self.tags.get(n.id)
        if tag is None or tag.kind not in HARDWARE:
            return 2
        return 0 if tag.kind is TagKind.GROUP else 1


def work_of(knl: Any) -> Work:
    plain = knl.plain if getattr(knl, "plain", None) is not None else None
    sch = plain.copy() if plain is not None else Schedule(knl.program)
    return Work(sch, dict(getattr(knl, "tags", ()) or ()))


def tagged_state(work: Work) -> st.State:
    """The plain state with the loop kinds of the tags set, in one pass over the tree (the
    schedule's shape, hence every cached legality verdict, is the plain state's)."""
    tags = {i: t for i, t in work.tags.items() if t.kind is not TagKind.SERIAL}
    if not tags:
        return work.sch.state

    def fn(n):
        tag = tags.get(n.id) if isinstance(n, LoopNode) else None
        if tag is None:
            return n
        if tag.kind in HARDWARE:
            return replace(n, kind=LoopKind.THREAD, thread=thread_name(tag))
        if tag.kind is TagKind.VECTOR:
            return replace(n, kind=LoopKind.VECTORIZED)
        return replace(n, kind=LoopKind.UNROLLED, unroll_factor=None)
    state = work.sch.state
    return state.with_root(tree_edits.map_tree(state.root, fn))


def derive(knl: Any, work: Work, step: str, args: tuple, kwargs: dict) -> Any:
    tagged = with_state(work.sch, tagged_state(work))
    return replace(knl, schedule=tagged, plain=work.sch, tags=tuple(sorted(work.tags.items())),
                   history=knl.history + ((step, args, tuple(kwargs.items())),))


def schedule_of(knl: Any) -> Schedule:
    """The schedule of a kernel (transformed, or the loop tree as written), verified."""
    if knl.schedule is None:
        return Schedule(knl.program)
    vd.verify(knl.schedule.state, "the kernel's transformations")
    return knl.schedule


def loops_named(knl: Any, iname: str, sch: Schedule | None = None) -> list[LoopHandle]:
    """Every loop of the kernel's schedule named ``iname`` (one per nest that has it)."""
    s = sch if sch is not None else work_of(knl).sch
    return [LoopHandle(n.id, n.name) for n in loops(s.state.root) if n.name == iname]


def require_loops(iname: str, sch: Schedule, fn: str) -> list[LoopHandle]:
    found = loops_named(None, iname, sch)
    if not found:
        names = sorted({n.name for n in loops(sch.state.root)})
        raise ScheduleError(f"{fn}: the kernel has no loop '{iname}'; its loops are "
                            f"{', '.join(names) or 'none'}")
    return found


def taken_names(sch: Schedule) -> set[str]:
    p = sch.program
    return ({n.name for n in loops(sch.state.root)} | set(p.params)
            | {b.name for b in p.buffers})


def tag_pairs(tags: Mapping[str, str] | Sequence[tuple[str, str]] | str) -> dict[str, str]:
    if isinstance(tags, str):
        pairs = {}
        for part in tags.split(","):
            if part.strip():
                name, sep, tag = part.partition(":")
                if not sep:
                    raise ScheduleError(f"tag_inames: write 'iname:tag', got {part.strip()!r}")
                pairs[name.strip()] = tag.strip()
        return pairs
    return dict(tags.items()) if isinstance(tags, Mapping) else dict(tags)


def apply_tags(work: Work, tags: Mapping[str, str]) -> None:
    parsed = {name: parse_tag(t, name) for name, t in tags.items()}
    for name, tag in parsed.items():
        for h in require_loops(name, work.sch, "tag_inames"):
            apply_tag(work, h, tag)
    check_axes(work)
    hoist_hardware_loops(work)
    vd.check_launches(tagged_state(work), f"tag_inames({', '.join(sorted(parsed))})")


def apply_tag(work: Work, h: LoopHandle, tag: Tag) -> None:
    """Record a tag after the check its Schedule primitive makes (bind, vectorize)."""
    state = work.sch.state
    node = state.loop(h.id)
    assert node is not None
    old = work.tags.get(h.id)
    if old is not None:
        if old == tag:
            return
        raise ScheduleError(f"tag_inames: loop '{h.name}' is already tagged {old}; tag each "
                            "loop once")
    if tag.kind is TagKind.VECTOR and any(isinstance(c, LoopNode) for c in node.children):
        raise ScheduleError(f"cannot vectorize loop {st.loop_label(state, node)}: it contains "
                            "other loops; vectorize an innermost loop")
    if tag.kind in HARDWARE or tag.kind is TagKind.VECTOR:
        kind = LoopKind.VECTORIZED if tag.kind is TagKind.VECTOR else LoopKind.THREAD
        thread = thread_name(tag) if tag.kind in HARDWARE else None
        new = loops_mod.set_kind(state, node, kind, thread=thread)
        bad = vd.check_parallel(new, new.loop(node.id))  # type: ignore[arg-type]
        if bad is not None:
            verb = "vectorize" if tag.kind is TagKind.VECTOR else "bind"
            hint = (" It is a reduction loop: split it and use rfactor, or choose a spatial "
                    "loop." if bad.dependence.reduction else _copy_hint(new, node, bad))
            raise ScheduleError(f"cannot {verb} loop {st.loop_label(state, node)} ({tag}): it "
                                f"carries {bad.summary()}; for instance {bad.describe()}.{hint}",
                                dependence=bad.evidence())
    work.tags[h.id] = tag


def _copy_hint(state: Any, node: LoopNode, bad: Any) -> str:
    """Why a value of a per-work-group (or per-work-item) temporary cannot cross the loop."""
    buf = bad.dependence.buffer
    if buf not in vd.own_copies(state, state.loop(node.id)):
        return ""
    thread = state.loop(node.id).thread
    owner = "work-item" if thread is not None and thread.is_item else "work-group"
    return (f" Each {owner} has its own copy of temporary {buf}, so no {owner} sees a value "
            f"another one wrote: read only elements of {buf} that the same {owner} writes "
            "(bound the reads in the domain), or pl.assume sizes for which it does "
            "(\"n mod 16 = 0\").")


def check_axes(work: Work) -> None:
    for s in work.sch.program.statements:
        seen: dict[Tag, str] = {}
        for n in work.sch.state.stmt_path(s.name):
            tag = work.tags.get(n.id)
            if tag is None or tag.kind not in HARDWARE:
                continue
            if tag in seen:
                raise ScheduleError(f"tag_inames: loops '{seen[tag]}' and '{n.name}' around "
                                    f"'{s.name}' both use {tag}; give each loop of a nest its "
                                    "own axis")
            seen[tag] = n.name


def chain_from(node: LoopNode) -> list[LoopNode]:
    """The perfectly nested loops from ``node`` down (each the only child of the one above)."""
    out = [node]
    while len(out[-1].children) == 1 and isinstance(out[-1].children[0], LoopNode):
        out.append(out[-1].children[0])
    return out


def hoist_hardware_loops(work: Work) -> None:
    """Work-group loops outermost, work-item loops next, along each nest's perfect chain."""
    sch = work.sch
    for top in sch.state.root.children:
        if not isinstance(top, LoopNode):
            continue
        chain = chain_from(top)
        wanted = sorted(chain, key=work.rank)   # stable: keeps the order within each rank
        last = max((k for k, n in enumerate(chain) if work.rank(n) < 2), default=-1)
        if last < 0 or [n.id for n in wanted] == [n.id for n in chain]:
            continue
        moved = [LoopHandle(n.id, n.name) for n in wanted[:last + 1]]
        try:
            sch.reorder(*moved)
        except ScheduleError as e:
            names = ", ".join(n.name for n in wanted[:last + 1] if work.rank(n) < 2)
            raise ScheduleError(f"tag_inames: cannot move the parallel loops {names} outside "
                                f"the others: {e}") from None
