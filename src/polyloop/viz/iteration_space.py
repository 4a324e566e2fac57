# SPDX-License-Identifier: Apache-2.0
"""Pictures of iteration spaces (seed 002, figures 2-4 and 8): the points of a statement's
domain, its dependences as arrows, and how a schedule orders them (wavefronts, tiles).

>>> import polyloop as pl, polyloop.viz as viz                  # doctest: +SKIP
>>> fig = viz.plot_iteration_space(stencil, params={"n": 8})     # doctest: +SKIP
>>> fig.savefig("stencil.png")                                   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Any, Sequence

from ..schedule.analysis import dependences
from ..errors import PolyloopError
from ..ir.program import Program
from ..poly.affine import prefix_map
from ..poly.enumerate import points
from ..poly.instances import dependence_pairs, time_vectors
from ..schedule import Schedule

MAX_ARROWS = 2000


def _figure(size: tuple[float, float] = (5.5, 5.0)) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PolyloopError("polyloop.viz draws with matplotlib, which is not installed; "
                            "install the extra: pip install 'polyloop[viz]'") from None
    return Figure(figsize=size)


def _program_and_schedule(obj: Program | Schedule,
                          schedule: Schedule | None) -> tuple[Program, Schedule | None]:
    if isinstance(obj, Schedule):
        return obj.original, schedule if schedule is not None else obj
    if isinstance(obj, Program):
        return obj, schedule
    raise PolyloopError(f"expected a Program or a Schedule, got {obj!r}")


def _statement(program: Program, statement: str | None) -> str:
    if statement is not None:
        program.statement(statement)
        return statement
    if len(program.statements) != 1:
        raise PolyloopError(f"program '{program.name}' has {len(program.statements)} statements; "
                            "choose one with statement=: "
                            + ", ".join(s.name for s in program.statements))
    return program.statements[0].name


def _dims(names: Sequence[str], dims: Sequence[int | str]) -> tuple[int, int]:
    if len(names) < 1:
        raise PolyloopError("the statement has no loops to draw")
    picked = []
    for d in dims:
        if isinstance(d, str):
            if d not in names:
                raise PolyloopError(f"no dimension '{d}'; dimensions: {', '.join(names)}")
            picked.append(names.index(d))
        else:
            if not 0 <= d < len(names):
                raise PolyloopError(f"dimension {d} out of range for {', '.join(names)}")
            picked.append(d)
    if len(picked) != 2 or picked[0] == picked[1]:
        raise PolyloopError(f"dims= names two different dimensions, got {list(dims)}")
    return picked[0], picked[1]


def plot_iteration_space(program: Program | Schedule, statement: str | None = None,
                         params: dict[str, int] | None = None, deps: bool = True,
                         schedule: Schedule | None = None, *, dims: Sequence[int | str] = (0, 1),
                         group_depth: int = 1) -> Any:
    """A matplotlib Figure of one statement's iteration space (two of its dimensions).

    Points are the statement's instances for the sizes in ``params``; with ``deps`` the
    dependences between its instances are arrows; with a ``schedule``, points that share the
    values of the statement's first ``group_depth`` loops (a wavefront, or a tile with
    ``group_depth=2`` after tiling) have one colour and are joined in execution order.
    """
    prog, sch = _program_and_schedule(program, schedule)
    name = _statement(prog, statement)
    stmt = prog.statement(name)
    if len(stmt.iters) < 2:
        dims = (0, 0)
    x, y = _dims(stmt.iters, dims) if len(stmt.iters) >= 2 else (0, 0)
    sizes = dict(params) if params is not None else {p: 8 for p in prog.params}
    pts = points(prog, stmt, sizes)
    fig = _figure()
    ax = fig.add_subplot()
    proj = [(p[x], p[y]) for p in pts]
    if sch is not None:
        _draw_groups(ax, sch, name, pts, proj, sizes, group_depth)
    else:
        ax.scatter([p[0] for p in proj], [p[1] for p in proj], s=18, color="black", zorder=3,
                   label="instances")
    if deps:
        _draw_arrows(ax, prog, name, sizes, lambda p: (p[x], p[y]))
    ax.set_xlabel(stmt.iters[x])
    ax.set_ylabel(stmt.iters[y] if len(stmt.iters) > 1 else "")
    ax.set_title(f"{name}: {stmt.domain}", fontsize=8)
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, linewidth=0.3)
    return fig


def _draw_arrows(ax: Any, source: Program | Schedule, stmt: str, sizes: dict[str, int],
                 to_xy) -> int:
    """One arrow per distinct (projected) instance pair of the statement's dependences."""
    program = source.program if isinstance(source, Schedule) else source
    drawn: set[tuple] = set()
    for d in dependences(source):
        if d.source != stmt or d.sink != stmt:
            continue
        for a, b in dependence_pairs(program, d, sizes):
            pa, pb = to_xy(a), to_xy(b)
            if pa == pb or (pa, pb) in drawn:
                continue
            drawn.add((pa, pb))
            if len(drawn) > MAX_ARROWS:
                return len(drawn)
            ax.annotate("", xy=pb, xytext=pa, zorder=2,
                        arrowprops={"arrowstyle": "->", "color": "tab:blue", "lw": 0.8,
                                    "shrinkA": 3, "shrinkB": 3})
    return len(drawn)


def _draw_groups(ax: Any, sch: Schedule, stmt: str, pts: list[tuple[int, ...]],
                 proj: list[tuple[int, int]], sizes: dict[str, int], depth: int) -> None:
    loops = sch.state.stmt_path(stmt)
    if not loops:
        raise PolyloopError(f"statement '{stmt}' has no loops in the schedule")
    depth = max(1, min(depth, len(loops)))
    values = time_vectors(sch.program, prefix_map(sch.program, stmt,
                                                  [lp.expr(stmt) for lp in loops]), sizes)
    order = sorted(range(len(pts)), key=lambda k: values[pts[k]])
    groups: dict[tuple[int, ...], list[int]] = {}
    for k in order:
        groups.setdefault(values[pts[k]][:depth], []).append(k)
    keys = sorted(groups)
    colors = [keys.index(values[p][:depth]) for p in pts]
    ax.scatter([p[0] for p in proj], [p[1] for p in proj], c=colors, cmap="viridis", s=22,
               zorder=3, label="instances")
    for key in keys:
        members = groups[key]
        if len(members) > 1:
            ax.plot([proj[k][0] for k in members], [proj[k][1] for k in members], linewidth=1.0,
                    alpha=0.6, color="tab:green", zorder=1)
    names = ", ".join(lp.name for lp in loops[:depth])
    ax.text(0.01, 0.99, f"colour: {names} ({len(keys)} groups)", transform=ax.transAxes,
            fontsize=7, va="top")


def plot_schedule(schedule: Schedule, statement: str | None = None,
                  params: dict[str, int] | None = None, deps: bool = True, *,
                  dims: Sequence[int | str] = (0, 1)) -> Any:
    """The same instances drawn in the schedule's basis: the values of the statement's loops
    (e.g. ``(i + j, i)`` after a wavefront, where independent points line up vertically)."""
    if not isinstance(schedule, Schedule):
        raise PolyloopError(f"plot_schedule takes a Schedule, got {schedule!r}")
    prog = schedule.program
    name = _statement(prog, statement)
    loops = schedule.state.stmt_path(name)
    names = [lp.name for lp in loops]
    x, y = _dims(names, dims) if len(names) >= 2 else (0, 0)
    sizes = dict(params) if params is not None else {p: 8 for p in prog.params}
    values = time_vectors(prog, prefix_map(prog, name, [lp.expr(name) for lp in loops]), sizes)
    fig = _figure()
    ax = fig.add_subplot()
    pts = sorted(values)
    ax.scatter([values[p][x] for p in pts], [values[p][y] for p in pts], s=18, color="black",
               zorder=3, label="instances")
    if deps:
        _draw_arrows(ax, schedule, name, sizes, lambda p: (values[p][x], values[p][y]))
    ax.set_xlabel(names[x])
    ax.set_ylabel(names[y] if len(names) > 1 else "")
    ax.set_title(f"{name} in the schedule's basis", fontsize=9)
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, linewidth=0.3)
    return fig
