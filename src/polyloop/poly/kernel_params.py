# SPDX-License-Identifier: Apache-2.0
"""Size parameters of a program: fixing their values and adding assumptions about them."""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import islpy as isl

from ..ir.dtypes import INDEX
from ..ir.expr import Const, Expr, substitute
from ..ir.program import Buffer, Program, Statement
from ..ir.simplify import simplify
from .kernel_domains import assumptions_text


def add_assumptions(program: Program, text: str) -> str:
    """The program's assumptions and ``text`` together, as one ISL parameter set text."""
    return assumptions_text(list(program.params), program.assumptions, text)


def _fix_set(text: str, values: Mapping[str, int]) -> str:
    s = isl.Set(text)
    for name, v in values.items():
        k = s.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            s = s.fix_val(isl.dim_type.param, k, isl.Val(v)).project_out(isl.dim_type.param, k, 1)
    return str(s.coalesce())


def fix(program: Program, values: Mapping[str, int]) -> Program:
    """The program with size parameters replaced by constants (they are no longer parameters)."""
    consts: dict[str, Expr] = {k: Const(v, INDEX, True) for k, v in values.items()}

    def sub(e: Expr) -> Expr:
        return simplify(substitute(e, consts)) if e.dtype.is_int else substitute(e, consts)
    statements = tuple(Statement(s.name, s.iters, _fix_set(s.domain, values), s.buffer,
                                 tuple(sub(i) for i in s.indices), substitute(s.value, consts),
                                 s.reduction, s.block, s.is_init) for s in program.statements)
    buffers = tuple(Buffer(b.name, tuple(sub(d) for d in b.shape), b.dtype, b.role, b.scope)
                    for b in program.buffers)
    assumptions = _fix_set(program.assumptions, values) if program.assumptions else ""
    return replace(program, buffers=buffers, statements=statements,
                   params=tuple(p for p in program.params if p not in values),
                   assumptions=assumptions, _by_name={})
