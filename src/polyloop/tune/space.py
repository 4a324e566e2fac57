# SPDX-License-Identifier: Apache-2.0
"""Spaces of schedules: functions that draw a schedule with the sampling primitives.

``generated_space`` is the space polyloop builds from any program by rules over its blocks
(``rules``): auto-inline elementwise producers, then one drawn strategy: register tiling of
the reduction blocks (SSRS-style loops with packing and a local tile), a built-in gemm
micro-kernel for matmul-like blocks, a low-bit dot-product tile (VNNI / BF16 / AMX) for int8
and bfloat16 matmul-like blocks (``rules_lowbit``), or ``pl.auto_schedule`` with its fusion
and tiling drawn. A user's space is any function ``space(sch) -> Schedule | None`` (None: ``sch``
itself, changed in place).

>>> import polyloop as pl
>>> from polyloop.tune.space import draw, generated_space
>>> A = pl.placeholder((32, 32), name="A"); B = pl.placeholder((32, 32), name="B")
>>> k = pl.reduce_axis((0, 32), name="k")
>>> C = pl.compute((32, 32), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
>>> sch = draw(pl.to_program(C), generated_space, seed=1)
>>> len(sch.trace) > 0
True
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from ..errors import PolyloopError, ScheduleError
from ..ir.program import Program
from ..schedule import Schedule
from ..schedule.auto import FUSIONS, auto_schedule, balance
from ..schedule.sampling import with_decisions
from . import rules, rules_lowbit

log = logging.getLogger("polyloop.tune")

SpaceFn = Callable[[Schedule], "Schedule | None"]

STRATEGIES = ("tile", "micro_kernel", "lowbit", "polyhedral")


def generated_space(sch: Schedule) -> Schedule:
    """The rule-generated space of ``sch``'s program (see the module docstring)."""
    rules.inline_elementwise(sch)
    shapes = [rules.block_shape(sch, b.name) for b in sch.blocks()]
    tiled = [s for s in shapes if rules.tileable(sch, s)]
    choices, weights = ["polyhedral"], [1.0]
    if tiled:
        choices.append("tile")
        weights.append(3.0)
        if len(tiled) == 1 and rules.matmul_like(sch, tiled[0]):
            choices.append("micro_kernel")
            weights.append(1.5)
        family = rules_lowbit.lowbit_family(sch, tiled[0]) if len(tiled) == 1 else None
        if family is not None:
            choices.append("lowbit")
            weights.append(4.0)
    strategy = sch.sample_categorical(choices, weights)
    if strategy == "polyhedral":
        return rules.polyhedral(sch)
    if strategy == "micro_kernel":
        rules.micro_kernel(sch, tiled[0])
    elif strategy == "lowbit":
        rules_lowbit.lowbit_tile(sch, tiled[0], family)
    else:
        for shape in tiled:
            sch = rules.separate_nest(sch, shape)
            rules.multi_level_tile(sch, rules.block_shape(sch, shape.name))
    rules.parallel_serial_nests(sch)
    balance(sch)        # a parallel loop over a triangle (syrk's tiles) hands out chunks
    return sch


def auto_schedule_decisions(program: Program) -> list[int]:
    """The decisions of ``generated_space`` that make ``pl.auto_schedule``'s own choices: no
    producer inlined, the ``polyhedral`` strategy, ``fusion="smart"``, ``tile="auto"``, half
    of L2 per tile, ``parallel=True`` and no unrolling.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A"); B = pl.compute((8,), lambda i: A[i], name="B")
    >>> auto_schedule_decisions(pl.to_program(B))
    [0, 1, 0, 0, 0, 0]
    """
    sch = Schedule(program)
    no_inline = [1] * sum(rules.inlinable(sch, b.name) for b in sch.blocks())
    # "polyhedral" is generated_space's first strategy; parallel's choices are [True, False]
    return no_inline + [0, FUSIONS.index("smart"), rules.AUTO_TILES.index("auto"),
                        rules.CACHE_SHARES.index(0.5), 0, rules.UNROLLS.index(1)]


def auto_schedule_seed(program: Program) -> Schedule | None:
    """``pl.auto_schedule(program)`` as a candidate of ``generated_space``: drawn with
    ``auto_schedule_decisions`` when that gives the very same schedule (its decisions can then
    be mutated), else auto_schedule's own trace; None when auto_schedule refuses the program.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A"); B = pl.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> seed = auto_schedule_seed(pl.to_program(B))
    >>> seed.state.root == pl.auto_schedule(B).state.root
    True
    """
    try:
        target = auto_schedule(program)
    except ScheduleError as e:
        log.info("pl.auto_schedule refuses %s, so it is no candidate: %s", program.name, e)
        return None
    drawn, _ = try_draw(program, generated_space, seed=0,
                        decisions=auto_schedule_decisions(program))
    if drawn is not None and drawn.state.root == target.state.root:
        return drawn
    return target


def draw(program: Program, space: SpaceFn, *, seed: int | None = None,
         decisions: Sequence[Any] = ()) -> Schedule:
    """One schedule of ``space`` for ``program``: its draws follow ``decisions`` in order
    (None, or a decision that does not fit: drawn with ``seed``). Raises ScheduleError when a
    primitive refuses the drawn schedule."""
    sch = with_decisions(Schedule(program, seed=seed), decisions)
    out = space(sch)
    if out is None:
        out = sch
    if not isinstance(out, Schedule):
        raise PolyloopError(f"a space function returns a pl.Schedule or None, got {out!r} from "
                            f"{getattr(space, '__name__', space)!r}")
    return out


def try_draw(program: Program, space: SpaceFn, *, seed: int | None,
             decisions: Sequence[Any] = ()) -> tuple[Schedule | None, str]:
    """``draw``, with a refused schedule returned as (None, the refusal)."""
    try:
        return draw(program, space, seed=seed, decisions=decisions), ""
    except ScheduleError as e:
        return None, str(e)
    except PolyloopError:
        raise               # the user's space function is wrong: say so at once
    except Exception as e:  # noqa: BLE001 - a polyloop bug must not end the search
        log.error("a primitive crashed while drawing a schedule of %s (a polyloop bug; the "
                  "draw is skipped)", program.name, exc_info=True)
        return None, f"{type(e).__name__}: {e}"
