# SPDX-License-Identifier: Apache-2.0
"""Loo.py-style transformations of kernels made by ``pl.make_kernel``, built on the Schedule.

Each function takes a kernel and returns a new one; the kernel it was given is unchanged.
The work is done by the Schedule primitives (split, reorder, bind, unroll, vectorize, fuse,
cache_read, compute_at), so every transformation is checked against the exact dependences of
the kernel as written, exactly as for ``pl.Schedule``, and a refused one raises
``ScheduleError`` naming the dependence it would break.

>>> import polyloop as pl
>>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
>>> knl = pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")
>>> [h.name for h in loops_named(knl, "i_inner")]
['i_inner']

Kernels are duck-typed here (``program``, ``root``, ``schedule``, ``history``): the kernel
class belongs to the front end, a sibling layer this package does not import.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import ScheduleError
from ..ir.loops import LoopKind
from ..ir.program import Program
from ..poly import affine, kernel_params
from ..poly.tree import LoopNode, loops
from . import loops as loops_mod
from . import state as st
from .prefetch import prefetch
from .schedule import Schedule
from .trace import LoopHandle, Trace

_AXES = ("x", "y", "z")


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
        return f"{self.kind.value}.{self.axis}" if self.kind in _HW else self.kind.value


_HW = (TagKind.GROUP, TagKind.LOCAL)
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


def thread_name(tag: Tag) -> str:
    return ("blockIdx." if tag.kind is TagKind.GROUP else "threadIdx.") + _AXES[tag.axis]


# schedules of kernels ----------------------------------------------------------------------------
#
# A kernel keeps two things (opaque to the front end): the schedule the loop primitives work on
# (``plain``, without loop kinds) and its tags by loop id. Each tag is checked when it is given
# (a parallel one must carry no dependence, as ``Schedule.bind`` checks); the tagged schedule
# (``schedule``) is the plain one with the kinds set, and ``schedule_of`` verifies all of it
# once more, exactly as ``Schedule`` does after every primitive, before it is built. Keeping
# the kinds out of the plain schedule means the primitives do not re-check every parallel loop
# each time: that is most of the cost of code generation.

def _with_state(sch: Schedule | None, state: st.State, origin: Program | None = None) -> Schedule:
    # Built like Schedule.copy(): renaming a loop or setting kinds in bulk is no primitive,
    # and the Schedule class has no constructor from a state.
    out = Schedule.__new__(Schedule)
    out._state = state
    out._origin = origin if origin is not None else sch.original  # type: ignore[union-attr]
    out.trace = sch.trace if sch is not None else Trace()
    return out


@dataclass
class _Work:
    """A transformation in progress: the plain schedule and the tags by loop id."""
    sch: Schedule
    tags: dict[int, Tag]

    def rank(self, n: LoopNode) -> int:
        """0 for work-group loops, 1 for work-item loops, 2 for the others."""
        tag = self.tags.get(n.id)
        if tag is None or tag.kind not in _HW:
            return 2
        return 0 if tag.kind is TagKind.GROUP else 1


def _work(knl: Any) -> _Work:
    plain = knl.plain if getattr(knl, "plain", None) is not None else None
    sch = plain.copy() if plain is not None else Schedule(knl.program)
    return _Work(sch, dict(getattr(knl, "tags", ()) or ()))


def _tagged_state(work: _Work) -> st.State:
    state = work.sch.state
    for loop_id, tag in sorted(work.tags.items()):
        node = state.loop(loop_id)
        if node is None or tag.kind is TagKind.SERIAL:
            continue
        if tag.kind in _HW:
            state = loops_mod.set_kind(state, node, LoopKind.THREAD, thread=thread_name(tag))
        elif tag.kind is TagKind.VECTOR:
            state = loops_mod.set_kind(state, node, LoopKind.VECTORIZED)
        else:
            state = loops_mod.set_kind(state, node, LoopKind.UNROLLED, unroll_factor=None)
    return state


def _derive(knl: Any, work: _Work, step: str, args: tuple, kwargs: dict) -> Any:
    tagged = _with_state(work.sch, _tagged_state(work))
    return replace(knl, schedule=tagged, plain=work.sch, tags=tuple(sorted(work.tags.items())),
                   history=knl.history + ((step, args, tuple(kwargs.items())),))


def schedule_of(knl: Any) -> Schedule:
    """The schedule of a kernel (transformed, or the loop tree as written), verified."""
    if knl.schedule is None:
        return Schedule(knl.program)
    st.verify(knl.schedule.state, "the kernel's transformations")
    return knl.schedule


def loops_named(knl: Any, iname: str, sch: Schedule | None = None) -> list[LoopHandle]:
    """Every loop of the kernel's schedule named ``iname`` (one per nest that has it)."""
    s = sch if sch is not None else _work(knl).sch
    return [LoopHandle(n.id, n.name) for n in loops(s.state.root) if n.name == iname]


def _require(iname: str, sch: Schedule, fn: str) -> list[LoopHandle]:
    found = loops_named(None, iname, sch)
    if not found:
        names = sorted({n.name for n in loops(sch.state.root)})
        raise ScheduleError(f"{fn}: the kernel has no loop '{iname}'; its loops are "
                            f"{', '.join(names) or 'none'}")
    return found


def _taken(sch: Schedule) -> set[str]:
    p = sch.program
    return ({n.name for n in loops(sch.state.root)} | set(p.params)
            | {b.name for b in p.buffers})


# transformations ---------------------------------------------------------------------------------

def split_iname(knl: Any, iname: str, factor: int, outer_tag: str | None = None,
                inner_tag: str | None = None, *, outer_iname: str | None = None,
                inner_iname: str | None = None) -> Any:
    """Split loop ``iname`` into ``{iname}_outer`` (trip count ceil(extent/factor)) and
    ``{iname}_inner`` (``factor``); a factor that does not divide the extent is fine (isl
    writes exact bounds). Tags may be given for the new loops.

    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")  # doctest: +SKIP
    >>> knl = pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")  # doctest: +SKIP
    """
    work = _work(knl)
    sch = work.sch
    outer = outer_iname or f"{iname}_outer"
    inner = inner_iname or f"{iname}_inner"
    handles = _require(iname, sch, "split_iname")
    taken = _taken(sch) - {iname}
    for new in (outer, inner):
        if new in taken or outer == inner:
            raise ScheduleError(f"split_iname: the name '{new}' is already used; choose another "
                                "with outer_iname=/inner_iname=")
    for h in handles:
        if h.id in work.tags:
            raise ScheduleError(f"split_iname: loop '{iname}' is already tagged; split it "
                                "before tagging")
        sch.split(h, [None, factor], names=[outer, inner])
    tags = {k: v for k, v in ((outer, outer_tag), (inner, inner_tag)) if v is not None}
    if tags:
        _tag_schedule(work, tags)
    return _derive(knl, work, "split_iname", (iname, factor),
                   {"outer_tag": outer_tag, "inner_tag": inner_tag, "outer_iname": outer,
                    "inner_iname": inner})


def tag_inames(knl: Any, tags: Mapping[str, str] | Sequence[tuple[str, str]] | str) -> Any:
    """Tag loops: ``g.N`` (work-group index N), ``l.N`` (work-item index N within the group),
    ``unr`` (unroll), ``vec`` (SIMD), ``ilp`` (unrolled), ``for`` (sequential). A parallel tag
    on a loop that carries a dependence is refused. Work-group loops move outermost and
    work-item loops just inside them, where the loop nest allows it.

    >>> knl = pl.tag_inames(knl, {"i_outer": "g.0", "i_inner": "l.0"})  # doctest: +SKIP
    """
    pairs = _tag_pairs(tags)
    work = _work(knl)
    _tag_schedule(work, pairs)
    return _derive(knl, work, "tag_inames", (pairs,), {})


def _tag_pairs(tags: Mapping[str, str] | Sequence[tuple[str, str]] | str) -> dict[str, str]:
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


def _tag_schedule(work: _Work, tags: Mapping[str, str]) -> None:
    parsed = {name: parse_tag(t, name) for name, t in tags.items()}
    fs = work.sch.state.schedule_map()   # loop kinds do not change it
    for name, tag in parsed.items():
        for h in _require(name, work.sch, "tag_inames"):
            _apply_tag(work, h, tag, fs)
    _check_axes(work)
    _hoist_hardware_loops(work)


def _apply_tag(work: _Work, h: LoopHandle, tag: Tag, fs=None) -> None:
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
        raise ScheduleError(f"cannot vectorize loop '{node.name}': it contains other loops; "
                            "vectorize an innermost loop")
    if tag.kind in _HW or tag.kind is TagKind.VECTOR:
        kind = LoopKind.VECTORIZED if tag.kind is TagKind.VECTOR else LoopKind.THREAD
        thread = thread_name(tag) if tag.kind in _HW else None
        new = loops_mod.set_kind(state, node, kind, thread=thread)
        bad = st.check_parallel(new, new.loop(node.id), fs)  # type: ignore[arg-type]
        if bad is not None:
            verb = "vectorize" if tag.kind is TagKind.VECTOR else "bind"
            hint = (" It is a reduction loop: split it and use rfactor, or choose a spatial "
                    "loop." if bad.dependence.reduction else "")
            raise ScheduleError(f"cannot {verb} loop '{node.name}' ({tag}): it carries "
                                f"{bad.summary()}; for instance {bad.describe()}.{hint}")
    work.tags[h.id] = tag


def _check_axes(work: _Work) -> None:
    for s in work.sch.program.statements:
        seen: dict[Tag, str] = {}
        for n in work.sch.state.stmt_path(s.name):
            tag = work.tags.get(n.id)
            if tag is None or tag.kind not in _HW:
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


def _hoist_hardware_loops(work: _Work) -> None:
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


def rename_iname(knl: Any, old: str, new: str) -> Any:
    """Rename a loop (every loop named ``old``)."""
    work = _work(knl)
    _require(old, work.sch, "rename_iname")
    if new in _taken(work.sch) or not new.isidentifier():
        raise ScheduleError(f"rename_iname: '{new}' is already used or not an identifier")

    def fn(n):
        return replace(n, name=new) if isinstance(n, LoopNode) and n.name == old else n
    state = work.sch.state.with_root(st.map_tree(work.sch.state.root, fn))
    work.sch = _with_state(work.sch, state)
    return _derive(knl, work, "rename_iname", (old, new), {})


def join_inames(knl: Any, inames: Sequence[str], new_iname: str | None = None,
                tag: str | None = None) -> Any:
    """Fuse directly nested loops (outermost first, inner ones of constant extent) into one."""
    work = _work(knl)
    sch = work.sch
    names = list(inames)
    if len(names) < 2:
        raise ScheduleError("join_inames needs at least two inames")
    new = new_iname or "_".join(names)
    if new in _taken(sch) - set(names):
        raise ScheduleError(f"join_inames: the name '{new}' is already used")
    for h in _require(names[0], sch, "join_inames"):
        chain = chain_from(sch.state.loop(h.id))  # type: ignore[arg-type]
        picked = []
        for name in names:
            hit = [n for n in chain if n.name == name]
            if not hit:
                raise ScheduleError(f"join_inames: loop '{name}' is not directly inside "
                                    f"'{names[0]}'")
            if hit[0].id in work.tags:
                raise ScheduleError(f"join_inames: loop '{name}' is tagged; join before tagging")
            picked.append(LoopHandle(hit[0].id, name))
        sch.fuse(*picked, name=new)
    if tag:
        _tag_schedule(work, {new: tag})
    return _derive(knl, work, "join_inames", (tuple(names),), {"new_iname": new, "tag": tag})


def add_prefetch(knl: Any, var_name: str, sweep_inames: Sequence[str] = (), *,
                 dim_arg_names: Sequence[str] | None = None, default_tag: str | None = "l.auto",
                 temporary_name: str | None = None) -> Any:
    """Copy the part of array ``var_name`` that the loops ``sweep_inames`` read into local
    memory ('shared' scope), once per iteration of the other loops around the reading
    instruction, and read the copy instead. Loops that are not swept move outside the
    work-item loops so that the whole work-group shares the copy; with ``default_tag="l.auto"``
    the copy loops are spread over the work-items. Barriers are placed when lowering.

    >>> knl = pl.add_prefetch(knl, "a", ["i_inner", "k_inner"])  # doctest: +SKIP
    """
    work = _work(knl)
    program = work.sch.program
    if not program.has_buffer(var_name):
        raise ScheduleError(f"add_prefetch: the kernel has no array '{var_name}'")
    readers = [s.name for s in program.statements
               if any(ld.buffer == var_name for ld in s.reads())]
    if len(readers) != 1:
        what = ", ".join(readers) if readers else "no instruction"
        raise ScheduleError(f"add_prefetch: '{var_name}' is read by {what}; add_prefetch needs "
                            "exactly one reading instruction")
    consumer = readers[0]
    path = work.sch.state.stmt_path(consumer)
    missing = [x for x in sweep_inames if x not in [n.name for n in path]]
    if missing:
        raise ScheduleError(f"add_prefetch: {', '.join(missing)} are not loops around "
                            f"'{consumer}' (its loops: {', '.join(n.name for n in path)})")
    outer = _fetch_outer(work, consumer, set(sweep_inames))
    state, fname, ids = prefetch(work.sch.state, consumer, var_name, outer, name=temporary_name,
                                 dim_names=list(dim_arg_names) if dim_arg_names else None)
    work.sch = _with_state(work.sch, state)
    if default_tag == "l.auto":
        _spread_over_items(work, consumer, ids)
    elif default_tag is not None:
        tag = parse_tag(default_tag)
        for i in ids:
            _apply_tag(work, LoopHandle(i, state.loop(i).name), tag)  # type: ignore[union-attr]
    return _derive(knl, work, "add_prefetch", (var_name, tuple(sweep_inames)),
                   {"dim_arg_names": tuple(dim_arg_names) if dim_arg_names else None,
                    "default_tag": default_tag, "temporary_name": temporary_name})


def _fetch_outer(work: _Work, consumer: str, sweep: set[str]) -> list[LoopNode]:
    """Reorder the consumer's loops to (work-group loops, loops not swept, work-item loops,
    swept loops) and return the first two groups: the copy runs once per their iteration."""
    sch = work.sch
    path = sch.state.stmt_path(consumer)
    groups = [n for n in path if work.rank(n) == 0]
    if [n.id for n in path[:len(groups)]] != [n.id for n in groups]:
        raise ScheduleError("add_prefetch: work-group loops must be the outermost loops")
    rest = path[len(groups):]
    keep = [n for n in rest if work.rank(n) == 2 and n.name not in sweep]
    items = [n for n in rest if work.rank(n) == 1]
    swept = [n for n in rest if work.rank(n) == 2 and n.name in sweep]
    wanted = keep + items + swept
    if [n.id for n in wanted] != [n.id for n in rest]:
        try:
            sch.reorder(*[LoopHandle(n.id, n.name) for n in wanted])
        except ScheduleError as e:
            raise ScheduleError(f"add_prefetch: loops {', '.join(n.name for n in keep)} must "
                                "move outside the work-item and swept loops to fetch once for "
                                f"all of them: {e}") from None
    outer = groups + keep
    if not outer:
        raise ScheduleError("add_prefetch: every loop around the instruction is swept; split a "
                            "loop and keep its outer part out of sweep_inames")
    return [sch.state.loop(n.id) for n in outer]  # type: ignore[misc]


def _spread_over_items(work: _Work, consumer: str, ids: list[int]) -> None:
    """Tag the copy loops, innermost first, with the work-item axes the consumer uses,
    splitting a loop longer than the work-group on its axis."""
    sch = work.sch
    sizes: dict[int, int] = {}
    for n in sch.state.stmt_path(consumer):
        tag = work.tags.get(n.id)
        if tag is not None and tag.kind is TagKind.LOCAL:
            lo, hi = _loop_range(sch, n)
            if lo is not None and hi is not None:
                sizes[tag.axis] = max(sizes.get(tag.axis, 0), hi - lo + 1)
    for loop_id, axis in zip(reversed(ids), sorted(sizes)):
        node = sch.state.loop(loop_id)
        assert node is not None
        lo, hi = _loop_range(sch, node)
        if lo is None or hi is None:
            continue
        h = LoopHandle(node.id, node.name)
        if hi - lo + 1 > sizes[axis]:
            h = sch.split(h, [None, sizes[axis]],
                          names=[f"{node.name}_outer", f"{node.name}_inner"])[1]
        _apply_tag(work, h, Tag(TagKind.LOCAL, axis))


def _loop_range(sch: Schedule, node: LoopNode) -> tuple[int | None, int | None]:
    los, his = zip(*(affine.value_range(sch.program, s, e) for s, e in node.exprs))
    if None in los or None in his:
        return None, None
    return min(los), max(his)


# program-level changes: a new reference program, the transformations replayed ---------------------

def assume(knl: Any, assumptions: str) -> Any:
    """Tell polyloop facts about the size parameters (``"n mod 16 = 0 and n >= 16"``) so that
    isl can drop the boundary checks they make unnecessary. Not checked at run time.
    Earlier transformations are replayed on the kernel with the assumptions."""
    text = kernel_params.add_assumptions(knl.program, assumptions)
    base = replace(knl, program=knl.program.replace(assumptions=text), schedule=None, plain=None,
                   tags=(), history=())
    out = _replay(base, knl.history)
    return replace(out, history=knl.history + (("assume", (assumptions,), ()),))


def fix_parameters(knl: Any, **values: int) -> Any:
    """Give size parameters fixed values (``n=1024``): they disappear from the kernel's
    arguments and loop bounds become constants. Earlier transformations are replayed."""
    for k, v in values.items():
        if k not in knl.program.params:
            raise ScheduleError(f"fix_parameters: '{k}' is not a size parameter; parameters: "
                                f"{', '.join(knl.program.params) or 'none'}")
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ScheduleError(f"fix_parameters: {k} must be a non-negative int, got {v!r}")
    program = kernel_params.fix(knl.program, values)
    base = replace(knl, program=program, schedule=None, plain=None, tags=(), history=())
    out = _replay(base, knl.history)
    return replace(out, history=knl.history + (("fix_parameters", (), tuple(values.items())),))


def _replay(knl: Any, history: Sequence[tuple[str, tuple, tuple]]) -> Any:
    for step, args, kwargs in history:
        fn: Callable[..., Any] = TRANSFORMATIONS[step]
        knl = fn(knl, *args, **dict(kwargs))
    return knl


TRANSFORMATIONS: dict[str, Callable[..., Any]] = {
    "split_iname": split_iname, "tag_inames": tag_inames, "rename_iname": rename_iname,
    "join_inames": join_inames, "assume": assume, "fix_parameters": fix_parameters,
    "add_prefetch": add_prefetch,
}
