# SPDX-License-Identifier: Apache-2.0
"""``pl.precompute``: materialise a kernel's substitution rule into a temporary (Loo.py).

An instruction that calls a rule ``f(x, y) := ...`` evaluates the rule's body at every call.
``precompute(knl, "f", sweep_inames)`` instead computes, once per iteration of the loops that
are *not* swept, every value ``f(x, y)`` the swept loops ask for (the exact footprint of the
calls' arguments, from isl: a stencil's halo included) into a temporary, and the instruction
reads the temporary. With work-item loops among the swept ones the temporary is shared by the
work-group (local memory; the copy loops are spread over the work-items and barriers are
placed when lowering), otherwise it is private to each iteration.

>>> import polyloop as pl
>>> knl = pl.make_kernel("{ [i] : 0 <= i < n }",
...                      ["f(x) := a[x] * a[x]", "out[i] = f(i) + f(i + 1)"])
>>> knl = pl.split_iname(knl, "i", 4)
>>> knl = pl.precompute(knl, "f", ["i_inner"])
>>> print(knl.loops())  # doctest: +NORMALIZE_WHITESPACE
for i_outer in range((n - 1) // 4 + 1):
    for f_dim_0 in range(min(5, n - 4 * i_outer + 1)):
        f_0[i_outer, 4 * i_outer + f_dim_0] = a[4 * i_outer + f_dim_0] * a[4 * i_outer + f_dim_0]
    for i_inner in range(min(4, n - 4 * i_outer)):
        out[4 * i_outer + i_inner] = f_0[i_outer, 4 * i_outer + i_inner] + f_0[i_outer, 4 * i_outer + i_inner + 1]
"""
from __future__ import annotations

from typing import Any, Sequence

from ..errors import ScheduleError, foreign_errors
from ..ir.dtypes import DType
from ..ir.expr import Const, Expr, Load, cast, loads, rewrite_topdown, same, substitute
from ..ir.program import Buffer, BufferRole, MemScope, Program, Statement
from ..poly.isl_util import is_affine
from ..poly.tree import loops
from .kernel_fetch import fetch_outer, spread_over_items
from .kernel_tags import derive, with_state, work_of
from .recompute import Recomputation, recompute
from ..util.names import unique_name
from .naming import fresh_name
from .state import State

__all__ = ["precompute"]

_SPACES = {"private": MemScope.LOCAL, "local": MemScope.SHARED, "global": MemScope.GLOBAL}


@foreign_errors("precompute", ScheduleError)
def precompute(knl: Any, subst_name: str, sweep_inames: Sequence[str] | str = (), *,
               temporary_address_space: str | None = None, temporary_name: str | None = None,
               precompute_inames: Sequence[str] | None = None,
               default_tag: str | None = "l.auto") -> Any:
    """Compute the values of substitution rule ``subst_name`` that the loops ``sweep_inames``
    use into a temporary, once per iteration of the other loops around the calling
    instruction. ``temporary_address_space`` is "private", "local" or "global" (default:
    "local" when a swept loop runs on work-items, else "private"); ``precompute_inames``
    names the copy loops (default ``{temporary_name}_dim_k``).

    >>> knl = pl.precompute(knl, "f", ["i_inner"])  # doctest: +SKIP
    """
    rule = _rule(knl, subst_name)
    sweep = [x.strip() for x in sweep_inames.split(",")] if isinstance(sweep_inames, str) \
        else list(sweep_inames)
    work = work_of(knl)
    program = work.sch.program
    uses = _uses(knl, rule)
    consumer = _consumer(program, rule, uses)
    missing = [x for x in sweep if x not in [n.name for n in work.sch.state.stmt_path(consumer)]]
    if missing:
        raise ScheduleError(f"precompute: {', '.join(missing)} are not loops around "
                            f"'{consumer}', the instruction that calls rule '{rule.name}'")
    outer = fetch_outer(work, consumer, set(sweep), "precompute") if sweep else \
        list(work.sch.state.stmt_path(consumer))
    path = work.sch.state.stmt_path(consumer)
    for n in path[len(outer):]:
        if work.rank(n) == 1 and n.name not in sweep:
            outer.append(n)
        else:
            break
    swept_items = any(work.rank(n) == 1 for n in path[len(outer):])
    scope = _scope(temporary_address_space, swept_items)
    pseudo = fresh_name(program, f"{rule.name}_call")
    name = temporary_name or fresh_name(program, f"{rule.name}_0")
    marked, dtype = _marked(program, consumer, pseudo, uses)
    state = work.sch.state
    state = State(marked, state.root, state.deps, state.next_id)
    body = rule.body if rule.body.dtype is dtype else cast(dtype, rule.body)
    loop_names = {n.name for n in loops(work.sch.state.root)} | set(work.sch.program.params)
    what = Recomputation(
        pseudo, (consumer,), lambda dims: substitute(body, dict(zip(rule.params, dims))),
        dtype, name, scope, drop_buffers=(pseudo,),
        dim_names=tuple(precompute_inames) if precompute_inames else tuple(
            unique_name(f"{rule.name}_dim_{k}", loop_names) for k in range(len(rule.params))),
        reads=frozenset(ld.buffer for ld in loads(rule.body)))
    new, ids = recompute(state, what, outer, "precompute")
    work.sch = with_state(work.sch, new)
    if swept_items and default_tag == "l.auto" and scope is MemScope.SHARED:
        spread_over_items(work, consumer, ids)
    return derive(knl, work, "precompute", (subst_name, tuple(sweep)),
                  {"temporary_address_space": temporary_address_space,
                   "temporary_name": temporary_name,
                   "precompute_inames": tuple(precompute_inames) if precompute_inames else None,
                   "default_tag": default_tag})


def _rule(knl: Any, name: str) -> Any:
    rules = getattr(knl, "rules", ())
    rule = next((r for r in rules if r.name == name), None)
    if rule is None:
        names = ", ".join(r.name for r in rules) or "none"
        raise ScheduleError(f"precompute: kernel '{knl.program.name}' has no substitution rule "
                            f"'{name}'; its rules: {names}. Define one in the instructions, "
                            "like 'f(x) := a[x] * 2'")
    if rule.body is None:
        raise ScheduleError(f"precompute: the body of rule '{name}' ({rule.text.strip()}) needs "
                            "arguments that are not integers; only rules of index arguments "
                            "can be stored in a temporary")
    return rule


def _uses(knl: Any, rule: Any) -> list[tuple[tuple[Expr, ...], Expr]]:
    """The rule's calls (arguments, expanded value), with the sizes fixed since."""
    fixed: dict[str, Expr] = {}
    for step, _, kwargs in knl.history:
        if step == "fix_parameters":
            fixed.update({k: Const(v, DType.INT64, True) for k, v in kwargs})
    out = []
    for u in rule.uses:
        args = tuple(substitute(a, fixed) for a in u.args)
        bad = next((a for a in args if not a.dtype.is_int or not is_affine(a)), None)
        if bad is not None:
            raise ScheduleError(f"precompute: rule '{rule.name}' is called with argument {bad}; "
                                "the arguments of a precomputed rule must be affine integer "
                                "expressions of the loops and sizes")
        out.append((args, substitute(u.value, fixed)))
    return out


def _calls(value: Expr, uses: list[tuple[tuple[Expr, ...], Expr]]) -> list[int]:
    found: list[int] = []

    def fn(e: Expr) -> Expr | None:
        for k, (_, v) in enumerate(uses):
            if same(e, v):
                found.append(k)
                return e
        return None
    rewrite_topdown(value, fn)
    return found


def _consumer(program: Program, rule: Any, uses: list) -> str:
    hits = [s.name for s in program.statements if _calls(s.value, uses)]
    if not hits:
        raise ScheduleError(f"precompute: no instruction calls rule '{rule.name}' any more (an "
                            "earlier transformation may have rewritten its calls); precompute "
                            "before it")
    if len(hits) > 1:
        raise ScheduleError(f"precompute: rule '{rule.name}' is called by {', '.join(hits)}; "
                            "precompute needs exactly one calling instruction (write a rule "
                            "per instruction)")
    return hits[0]


def _marked(program: Program, consumer: str, pseudo: str, uses: list
            ) -> tuple[Program, DType]:
    """The program with the consumer's calls read from ``pseudo[args]``, a stand-in array
    the recomputation replaces; and the calls' dtype."""
    s = program.statement(consumer)
    dtypes = {v.dtype for _, v in uses}
    if len(dtypes) != 1:
        raise ScheduleError(f"precompute: the calls of the rule give values of dtypes "
                            f"{', '.join(sorted(d.value for d in dtypes))}; they must agree")
    dtype = dtypes.pop()

    def fn(e: Expr) -> Expr | None:
        for args, v in uses:
            if same(e, v):
                return Load(pseudo, args, dtype)
        return None
    value = rewrite_topdown(s.value, fn)
    ndim = len(uses[0][0])
    stand_in = Buffer(pseudo, tuple(Const(1, DType.INT64, True) for _ in range(ndim)), dtype,
                      BufferRole.TEMP)
    stmts = tuple(Statement(x.name, x.iters, x.domain, x.buffer, x.indices, value, x.reduction,
                            x.block, x.is_init) if x.name == consumer else x
                  for x in program.statements)
    return program.replace(statements=stmts, buffers=program.buffers + (stand_in,)), dtype


def _scope(space: str | None, swept_items: bool) -> MemScope:
    if space is None:
        return MemScope.SHARED if swept_items else MemScope.LOCAL
    if space not in _SPACES:
        raise ScheduleError(f"precompute: unknown temporary_address_space {space!r}; valid: "
                            + ", ".join(repr(x) for x in _SPACES))
    return _SPACES[space]
