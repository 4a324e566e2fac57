# SPDX-License-Identifier: Apache-2.0
"""A program's assumptions about its sizes, as conditions the runtime checks before a call.

The compiler proves accesses in bounds and drops guards under the assumptions, so a call that
breaks one could read or write outside an array. isl writes the assumption set as one
expression (modulo constraints and disjunctions included); each operand of its top-level
``and`` becomes one check, so that an error names the one condition that failed.
"""
from __future__ import annotations

import islpy as isl

from ..ir.assumption import Assumption, conjuncts
from ..ir.expr import Const
from ..ir.program import Program
from .astgen import ast_expr
from .isl_util import params_prefix, set_


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
