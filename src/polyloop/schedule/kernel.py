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
>>> knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }", "out[i, j] = a[i, j]")
>>> print(pl.prioritize_loops(knl, "j,i").loops().splitlines()[0])
for j in range(m):

Tags and the transformations' working state are in ``kernel_tags``; kernels are duck-typed
(the kernel class belongs to the front end, a sibling layer this package does not import).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from ..errors import ParseError, ScheduleError, foreign_errors
from ..ir.program import BufferRole, MemScope
from ..poly import kernel_params
from ..poly.tree import LoopNode
from .kernel_tags import (apply_tag, apply_tags, chain_from, derive, loops_named, parse_tag,
                          require_loops, schedule_of, tag_pairs, taken_names, with_state,
                          work_of)
from .kernel_fetch import fetch_outer, spread_over_items
from .kernel_precompute import precompute
from .prefetch import prefetch
from ..poly.tree_edits import map_tree
from .trace import LoopHandle

__all__ = ["add_prefetch", "assume", "fix_parameters", "join_inames", "loops_named",
           "prioritize_loops", "rename_iname", "schedule_of", "set_temporary_address_space",
           "split_iname", "tag_inames"]


# transformations ---------------------------------------------------------------------------------

@foreign_errors("split_iname", ScheduleError)
def split_iname(knl: Any, iname: str, factor: int, outer_tag: str | None = None,
                inner_tag: str | None = None, *, outer_iname: str | None = None,
                inner_iname: str | None = None, slabs: tuple[int, int] = (0, 0)) -> Any:
    """Split loop ``iname`` into ``{iname}_outer`` (trip count ceil(extent/factor)) and
    ``{iname}_inner`` (``factor``); a factor that does not divide the extent is fine (isl
    writes exact bounds). Tags may be given for the new loops.

    ``slabs=(first, last)`` (Loo.py) peels the partial outer iterations off: with any non-zero
    entry the full tiles get a nest of their own whose inner loop has the constant trip count
    ``factor`` (isl's full-tile isolation), and the partial tile its own nest.

    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")  # doctest: +SKIP
    >>> knl = pl.split_iname(knl, "i", 128, outer_tag="g.0", inner_tag="l.0")  # doctest: +SKIP
    """
    if not (isinstance(slabs, tuple) and len(slabs) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in slabs)):
        raise ScheduleError(f"split_iname: slabs= is a pair of non-negative ints (outer "
                            f"iterations peeled at the start and the end), got {slabs!r}")
    work = work_of(knl)
    sch = work.sch
    outer = outer_iname or f"{iname}_outer"
    inner = inner_iname or f"{iname}_inner"
    handles = require_loops(iname, sch, "split_iname")
    taken = taken_names(sch) - {iname}
    for new in (outer, inner):
        if new in taken or outer == inner:
            raise ScheduleError(f"split_iname: the name '{new}' is already used; choose another "
                                "with outer_iname=/inner_iname=")
    for h in handles:
        if h.id in work.tags:
            raise ScheduleError(f"split_iname: loop '{iname}' is already tagged; split it "
                                "before tagging")
        _, inner_loop = sch.split(h, [None, factor], names=[outer, inner])
        if any(slabs):      # full tiles in a nest of their own, with constant bounds
            sch.annotate(inner_loop, "isolate", "on")
    tags = {k: v for k, v in ((outer, outer_tag), (inner, inner_tag)) if v is not None}
    if tags:
        apply_tags(work, tags)
    return derive(knl, work, "split_iname", (iname, factor),
                   {"outer_tag": outer_tag, "inner_tag": inner_tag, "outer_iname": outer,
                    "inner_iname": inner} | ({"slabs": slabs} if any(slabs) else {}))


@foreign_errors("tag_inames", ScheduleError)
def tag_inames(knl: Any, tags: Mapping[str, str] | Sequence[tuple[str, str]] | str) -> Any:
    """Tag loops: ``g.N`` (work-group index N), ``l.N`` (work-item index N within the group),
    ``unr`` (unroll), ``vec`` (SIMD), ``ilp`` (unrolled), ``for`` (sequential). A parallel tag
    on a loop that carries a dependence is refused. Work-group loops move outermost and
    work-item loops just inside them, where the loop nest allows it.

    >>> knl = pl.tag_inames(knl, {"i_outer": "g.0", "i_inner": "l.0"})  # doctest: +SKIP
    """
    pairs = tag_pairs(tags)
    work = work_of(knl)
    apply_tags(work, pairs)
    return derive(knl, work, "tag_inames", (pairs,), {})


@foreign_errors("rename_iname", ScheduleError)
def rename_iname(knl: Any, old: str, new: str) -> Any:
    """Rename a loop (every loop named ``old``).

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    >>> print(pl.rename_iname(knl, "i", "row").loops())
    for row in range(n):
        out[row] = 2.0 * a[row]
    """
    work = work_of(knl)
    require_loops(old, work.sch, "rename_iname")
    if new in taken_names(work.sch) or not new.isidentifier():
        raise ScheduleError(f"rename_iname: '{new}' is already used or not an identifier")

    def fn(n):
        return replace(n, name=new) if isinstance(n, LoopNode) and n.name == old else n
    state = work.sch.state.with_root(map_tree(work.sch.state.root, fn))
    work.sch = with_state(work.sch, state)
    return derive(knl, work, "rename_iname", (old, new), {})


@foreign_errors("join_inames", ScheduleError)
def join_inames(knl: Any, inames: Sequence[str], new_iname: str | None = None,
                tag: str | None = None) -> Any:
    """Fuse directly nested loops (outermost first, inner ones of constant extent) into one.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < 4 }", "out[i, j] = a[i, j] + 1")
    >>> print(pl.join_inames(knl, ["i", "j"]).loops())
    for i_j in range(4 * n):
        out[i_j // 4, i_j % 4] = a[i_j // 4, i_j % 4] + 1.0
    """
    work = work_of(knl)
    sch = work.sch
    names = list(inames)
    if len(names) < 2:
        raise ScheduleError("join_inames needs at least two inames")
    new = new_iname or "_".join(names)
    if new in taken_names(sch) - set(names):
        raise ScheduleError(f"join_inames: the name '{new}' is already used")
    for h in require_loops(names[0], sch, "join_inames"):
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
        apply_tags(work, {new: tag})
    return derive(knl, work, "join_inames", (tuple(names),), {"new_iname": new, "tag": tag})


@foreign_errors("add_prefetch", ScheduleError)
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
    work = work_of(knl)
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
    outer = fetch_outer(work, consumer, set(sweep_inames))
    state, fname, ids = prefetch(work.sch.state, consumer, var_name, outer, name=temporary_name,
                                 dim_names=list(dim_arg_names) if dim_arg_names else None)
    work.sch = with_state(work.sch, state)
    if default_tag == "l.auto":
        spread_over_items(work, consumer, ids)
    elif default_tag is not None:
        tag = parse_tag(default_tag)
        for i in ids:
            apply_tag(work, LoopHandle(i, state.loop(i).name), tag)  # type: ignore[union-attr]
    return derive(knl, work, "add_prefetch", (var_name, tuple(sweep_inames)),
                   {"dim_arg_names": tuple(dim_arg_names) if dim_arg_names else None,
                    "default_tag": default_tag, "temporary_name": temporary_name})


# program-level changes: a new reference program, the transformations replayed ---------------------

@foreign_errors("assume", ParseError)
def assume(knl: Any, assumptions: str) -> Any:
    """Tell polyloop facts about the size parameters (``"n mod 16 = 0 and n >= 16"``) so that
    isl can drop the boundary checks they make unnecessary. Not checked at run time.
    Earlier transformations are replayed on the kernel with the assumptions.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]")
    >>> knl = pl.split_iname(knl, "i", 16)
    >>> print(knl.loops().splitlines()[1])
        for i_inner in range(min(16, n - 16 * i_outer)):
    >>> knl = pl.assume(knl, "n mod 16 = 0 and n >= 16")
    >>> print(knl.loops())
    for i_outer in range(n // 16):
        for i_inner in range(16):
            out[16 * i_outer + i_inner] = 2.0 * a[16 * i_outer + i_inner]
    """
    text = kernel_params.add_assumptions(knl.program, assumptions)
    base = replace(knl, program=knl.program.replace(assumptions=text), schedule=None, plain=None,
                   tags=(), history=())
    out = _replay(base, knl.history)
    return replace(out, history=knl.history + (("assume", (assumptions,), ()),))


@foreign_errors("fix_parameters", ScheduleError)
def fix_parameters(knl: Any, **values: int) -> Any:
    """Give size parameters fixed values (``n=1024``): they disappear from the kernel's
    arguments and loop bounds become constants. Earlier transformations are replayed.

    >>> import polyloop as pl
    >>> knl = pl.fix_parameters(pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 2*a[i]"), n=8)
    >>> knl.program.params
    ()
    >>> print(knl.loops())
    for i in range(8):
        out[i] = 2.0 * a[i]
    """
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


_SPACES = {"private": MemScope.LOCAL, "local": MemScope.SHARED, "global": MemScope.GLOBAL}


def prioritize_loops(knl: Any, order: str | Sequence[str]) -> Any:
    """Nest the named loops in this order, outermost first (``"i,j,k"``), wherever they are
    directly nested; refused with the dependence when that order would change the result.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < 4 }", "out[i, j] = a[i, j] + 1")
    >>> print(pl.prioritize_loops(knl, "j,i").loops())
    for j in range(4):
        for i in range(n):
            out[i, j] = a[i, j] + 1.0
    """
    names = [x.strip() for x in order.split(",")] if isinstance(order, str) else list(order)
    if len(names) < 2 or len(set(names)) != len(names):
        raise ScheduleError(f"prioritize_loops: give two or more distinct loop names, got "
                            f"{names}")
    work = work_of(knl)
    sch = work.sch
    for h in require_loops(names[0], sch, "prioritize_loops") + [
            x for name in names[1:] for x in require_loops(name, sch, "prioritize_loops")]:
        node = sch.state.loop(h.id) if _alive(sch, h.id) else None
        chain = _outermost_chain(sch, node, names) if node is not None else None
        if chain is None:
            continue
        picked = {n.name: n for n in chain if n.name in names}
        if len(picked) == len(names):
            sch.reorder(*[LoopHandle(picked[name].id, name) for name in names])
    return derive(knl, work, "prioritize_loops", (tuple(names),), {})


def _alive(sch: Any, loop_id: int) -> bool:
    try:
        sch.state.loop(loop_id)
    except Exception:  # noqa: BLE001 - a loop replaced by an earlier reorder of this call
        return False
    return True


def _outermost_chain(sch: Any, node: Any, names: list[str]) -> list | None:
    """The perfectly nested chain from ``node`` when ``node`` is the outermost named loop."""
    path = sch.state.path(node.id)
    if any(p.name in names for p in path[:-1]):
        return None
    return chain_from(node)


def set_temporary_address_space(knl: Any, name: str, space: str) -> Any:
    """Place a temporary in ``"private"`` (per work-item), ``"local"`` (per work-group) or
    ``"global"`` memory; earlier transformations are replayed on the kernel.

    OpenCL's ``"local"`` memory is ``MemScope.SHARED`` (GPU shared memory) in the program:

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", ["<> t = 2*a[i]", "out[i] = t + 1"])
    >>> knl = pl.set_temporary_address_space(knl, "t", "local")
    >>> knl.program.buffer("t").scope
    <MemScope.SHARED: 'shared'>
    """
    if space not in _SPACES:
        raise ScheduleError(f"set_temporary_address_space: unknown space {space!r}; valid "
                            f"spaces are {', '.join(repr(s) for s in _SPACES)}")
    program = knl.program
    if not program.has_buffer(name) or program.buffer(name).role is not BufferRole.TEMP:
        temps = [b.name for b in program.buffers if b.role is BufferRole.TEMP]
        raise ScheduleError(f"set_temporary_address_space: '{name}' is not a temporary of "
                            f"kernel '{program.name}'; temporaries: {', '.join(temps) or 'none'}")
    buffers = tuple(replace(b, scope=_SPACES[space]) if b.name == name else b
                    for b in program.buffers)
    base = replace(knl, program=program.replace(buffers=buffers), schedule=None, plain=None,
                   tags=(), history=())
    out = _replay(base, knl.history)
    return replace(out, history=knl.history + (("set_temporary_address_space", (name, space),
                                                ()),))


# Steps whose effect lives in the program itself (its assumptions, its fixed sizes): a replay
# on that program must not apply them again (n is no longer a parameter once fixed).
_IN_PROGRAM = frozenset({"assume", "fix_parameters", "set_temporary_address_space"})


def _replay(knl: Any, history: Sequence[tuple[str, tuple, tuple]]) -> Any:
    for step, args, kwargs in history:
        if step in _IN_PROGRAM:
            continue
        fn: Callable[..., Any] = TRANSFORMATIONS[step]
        knl = fn(knl, *args, **dict(kwargs))
    return knl


TRANSFORMATIONS: dict[str, Callable[..., Any]] = {
    "split_iname": split_iname, "tag_inames": tag_inames, "rename_iname": rename_iname,
    "join_inames": join_inames, "assume": assume, "fix_parameters": fix_parameters,
    "add_prefetch": add_prefetch, "prioritize_loops": prioritize_loops,
    "set_temporary_address_space": set_temporary_address_space, "precompute": precompute,
}
