# SPDX-License-Identifier: Apache-2.0
"""A program's assumptions about its sizes, as conditions the runtime checks before a call.

The compiler proves accesses in bounds and drops guards under the assumptions, so a call that
breaks one could read or write outside an array. isl writes the assumption set as one
expression (modulo constraints and disjunctions included); each operand of its top-level
``and`` becomes one check, so that an error names the one condition that failed.
"""
from __future__ import annotations

from collections.abc import Mapping

import islpy as isl

from ..ir.assumption import Assumption, conjuncts
from ..ir.expr import Const, Expr
from ..ir.program import Program
from .isl_ast import ast_expr
from .isl_util import expr_to_isl, params_prefix, set_


def assumption_checks(program: Program) -> tuple[Assumption, ...]:
    """The conditions on the size parameters that ``program.assumptions`` states, beyond the
    sizes being non-negative (which every call checks anyway).

    >>> from polyloop.ir.program import Program
    >>> p = Program("f", (), (), ("n", "m"), (), "[n, m] -> { : n >= 16 and n mod 4 = 0 }")
    >>> [str(a) for a in assumption_checks(p)]
    ['n >= 16', 'n % 4 == 0']
    """
    if not program.assumptions:
        return ()
    assumed = set_(program.assumptions)
    nonneg = " and ".join(f"{p} >= 0" for p in program.params) or "true"
    known = set_(f"{params_prefix(program.params)}{{ : {nonneg} }}")
    assumed = assumed.align_params(known.get_space())
    known = known.align_params(assumed.get_space())
    condition = ast_expr(isl.AstBuild.from_context(known).expr_from_set(assumed), {})
    return tuple(Assumption(c) for c in conjuncts(condition)
                 if not (isinstance(c, Const) and c.value))


def sizes_satisfying(program: Program, wanted: Mapping[str, int]) -> dict[str, int]:
    """``wanted`` when those sizes satisfy the program's assumptions, else the smallest sizes
    (lexicographically, at least ``wanted`` where possible) that do; ``wanted`` unchanged when
    no sizes do (the call then says which assumption fails).

    >>> from polyloop.ir.program import Program
    >>> p = Program("f", (), (), ("n",), (), "[n] -> { : n >= 100 and n mod 8 = 0 }")
    >>> sizes_satisfying(p, {"n": 5}), sizes_satisfying(p, {"n": 112})
    ({'n': 104}, {'n': 112})
    """
    checks = assumption_checks(program)
    if all(a.holds(wanted) for a in checks):
        return dict(wanted)
    pre = params_prefix(program.params)
    assumed = set_(program.assumptions)
    for floor in (wanted, {p: 0 for p in program.params}):
        bounds = " and ".join(f"{p} >= {floor[p]}" for p in program.params) or "true"
        candidates = assumed.intersect(set_(f"{pre}{{ : {bounds} }}").align_params(
            assumed.get_space()))
        if candidates.is_empty():
            continue
        n = candidates.dim(isl.dim_type.param)
        names = [candidates.get_dim_name(isl.dim_type.param, k) for k in range(n)]
        point = candidates.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n) \
            .lexmin().sample_point()
        found = {name: point.get_coordinate_val(isl.dim_type.set, k).to_python()
                 for k, name in enumerate(names)}
        return {p: found.get(p, wanted[p]) for p in wanted}
    return dict(wanted)


def with_upper_bound(program: Program, extent: Expr, bound: int) -> Program:
    """``program`` assuming also ``extent <= bound`` (an affine expression of its size
    parameters), so that every call checks it; raises ``NotAffine`` for another expression.

    >>> from polyloop.ir.program import Program, param
    >>> p = with_upper_bound(Program("f", (), (), ("k",), ()), param("k") * 4, 100)
    >>> [str(a) for a in assumption_checks(p)]
    ['k <= 25']
    """
    pre = params_prefix(program.params)
    limit = set_(f"{pre}{{ : {expr_to_isl(extent)} <= {bound} }}")
    if program.assumptions:
        limit = limit.intersect(set_(program.assumptions).align_params(limit.get_space()))
    return program.replace(assumptions=str(limit.remove_redundancies()))
