# SPDX-License-Identifier: Apache-2.0
"""A ``TensorIntrin`` implemented by polyloop itself: a schedule of the description's computation.

``check`` proves that the implementation computes the description: one update statement with
the same body up to a renaming of buffers, the same axes (in the same order, each indexing the
same dimensions of the same operands) over the same box, every axis starting at 0; a symbolic
axis runs up to a size parameter of the implementation, which becomes the trip count argument
of the generated function. The schedule itself (split, unroll, vectorize, ...) is kept: lowering
(``lower.tensorize``) turns it into the function's loops, code generation into C.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..errors import ArgumentError, ScheduleError
from ..ir.expr import Var, loads
from ..ir.loop_notes import NoteKey
from ..ir.program import Program, Statement
from ..poly.affine import value_range
from ..poly.isl_text import iterator_expr
from ..poly.launch import loop_upper_bound
from ..poly.tree import loops
from . import state as st
from .intrin_body import check_operands, match_body


@dataclass(frozen=True, slots=True)
class Implementation:
    """A checked polyloop implementation. ``state``: its scheduled program and loop tree.
    ``operands``: its buffers in call order (the description's written buffer, then its read
    ones). ``trip_counts``: the size parameter bounding each symbolic axis, in axis order.
    ``dropped_inits``: the statements that zero the output (an update intrinsic adds to it)."""
    state: st.State
    operands: tuple[str, ...]
    trip_counts: tuple[str, ...]
    dropped_inits: tuple[str, ...]
    fingerprint: str


def as_state(implementation: object) -> tuple[st.State, Program, str] | None:
    """(scheduled state, original program, replayable text) of a ``pl.Schedule``, a tensor
    from ``pl.compute`` (its default schedule) or a Program; None for anything else."""
    state = getattr(implementation, "state", None)
    if isinstance(state, st.State):
        original = getattr(implementation, "original", state.program)
        trace = getattr(implementation, "trace", None)
        return state, original, trace.to_json() if trace is not None else ""
    if isinstance(implementation, Program):
        return st.initial(implementation), implementation, ""
    if hasattr(implementation, "to_program"):
        program = implementation.to_program()  # type: ignore[union-attr]
        return st.initial(program), program, ""
    return None


def check(desc_program: Program, desc: Statement, state: st.State, original: Program,
          replay: str, name: str) -> Implementation:
    """The implementation of intrinsic ``name`` if it computes the description; else an
    ``ArgumentError`` that says what differs."""
    def refuse(what: str) -> ArgumentError:
        return ArgumentError(f"TensorIntrin {name!r}: the implementation does not compute the "
                             f"description: {what}")

    main = [s for s in original.statements if not s.is_init]
    if len(main) != 1:
        raise refuse(f"it has {len(main)} statements ({', '.join(s.name for s in main)}), "
                     "the description one")
    impl = main[0]
    try:
        check_operands(impl, "the implementation")
        rename = match_body(desc, impl, name)
    except (ArgumentError, ScheduleError) as e:
        raise refuse(str(e).replace("TensorIntrin: ", "").replace("tensorize: ", "")) from None
    if len(set(rename.values())) != len(rename):
        raise refuse("two operands of the description are one buffer of the implementation")
    if len(impl.iters) != len(desc.iters):
        raise refuse(f"it has {len(impl.iters)} axes ({', '.join(impl.iters)}), the "
                     f"description {len(desc.iters)} ({', '.join(desc.iters)})")
    for d, a in zip([desc.target] + loads(desc.value), [impl.target] + loads(impl.value)):
        want = [desc.iters.index(v.name) for v in d.indices]  # type: ignore[union-attr]
        have = [impl.iters.index(v.name) for v in a.indices]  # type: ignore[union-attr]
        if want != have:
            raise refuse(f"{a} does not index its buffer by the axes {d} does")
    trips = _trip_counts(desc_program, desc, original, impl, refuse)
    extra = sorted(set(original.params) - set(trips))
    if extra:
        raise refuse(f"it uses size parameter(s) {', '.join(extra)} that bound no axis; the "
                     "generated function only knows the trip counts of the symbolic axes")
    operands = (rename[desc.buffer],) + tuple(rename[ld.buffer] for ld in loads(desc.value))
    inits = _dropped_inits(state, impl, desc, refuse)
    text = "\n".join([str(original), replay, repr(trips)])
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return Implementation(state, operands, trips, inits, digest)


def _trip_counts(desc_program: Program, desc: Statement, original: Program, impl: Statement,
                 refuse) -> tuple[str, ...]:
    trips = []
    for axis, (d_it, i_it) in enumerate(zip(desc.iters, impl.iters)):
        d_lo, d_hi = value_range(desc_program, desc.name, _expr(desc, d_it))
        i_lo, i_hi = value_range(original, impl.name, _expr(impl, i_it))
        if d_lo != 0 or i_lo != 0:
            raise refuse(f"axis {axis} ({d_it} / {i_it}) must start at 0 in the description "
                         f"and the implementation (they start at {d_lo} and {i_lo})")
        if d_hi != i_hi:
            raise refuse(f"loop extent differs: axis {axis} runs "
                         f"{'a symbolic number of' if i_hi is None else i_hi + 1} iterations "
                         f"({i_it}) in the implementation, "
                         f"{'a symbolic number' if d_hi is None else d_hi + 1} ({d_it}) in the "
                         "description")
        if i_hi is None:
            top = loop_upper_bound(original, impl.name, _expr(impl, i_it))
            if not isinstance(top, Var) or top.name not in original.params:
                raise refuse(f"symbolic axis {i_it} runs up to {top}; it must run from 0 to a "
                             "size parameter (the trip count the call passes)")
            if top.name in trips:
                raise refuse(f"axes share the size parameter {top.name}; each symbolic axis "
                             "needs its own")
            trips.append(top.name)
    return tuple(trips)


def _expr(s: Statement, it: str) -> str:
    return iterator_expr(s.name, s.iters, it)


def _dropped_inits(state: st.State, impl: Statement, desc: Statement, refuse
                   ) -> tuple[str, ...]:
    """An update intrinsic adds to its output: the zeroing of the output is not part of it."""
    if any(k == NoteKey.TENSORIZE for n in loops(state.root) for k, _ in n.annotations):
        raise refuse("it tensorizes a loop itself; an implementation may not call another "
                     "intrinsic")
    inits = [s for s in state.program.statements if s.is_init]
    if desc.reduction is None:
        return ()
    kept = [s for s in inits if s.buffer != impl.buffer]
    if kept or impl.reduction is None:
        raise refuse(f"its reduction is initialised in {', '.join(s.buffer for s in kept)}, "
                     f"not in its output {impl.buffer} (cache_write?); an update intrinsic "
                     "adds to its output: accumulate into the output directly")
    return tuple(s.name for s in inits)
