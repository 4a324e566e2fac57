# SPDX-License-Identifier: Apache-2.0
"""The index expressions of affine accesses, written by isl in each statement instance's loops
during the AST build (``AccessIndices.at_domain``)."""
from __future__ import annotations

import islpy as isl

from ..ir.expr import BinOp, BinOpKind, Const, Expr, Load, Var, loads, walk
from ..ir.program import Program
from .isl_util import NotAffine, expr_to_isl, map_, params_prefix


class AccessIndices:
    """Index expressions of affine accesses, written by isl in the context of each statement
    instance's loops, so that ``P[(64*j0 + j1) // 64]`` comes out as ``P[j0]``. Where neither
    the access nor the instance's iterators divide (``a[i, k]`` at ``16*g + l``), putting the
    iterators into the indices is all isl would do, and ``user`` does that itself."""

    def __init__(self, program: Program):
        self.program = program
        self.found: list[dict[int, list[isl.AstExpr]]] = []
        # statement -> its affine accesses: (load, isl relation text, indices free of // and %)
        self._affine: dict[str, list[tuple[Load, str, bool]]] = {}

    def _accesses(self, name: str) -> list[tuple[Load, str, bool]]:
        if name not in self._affine:
            stmt = self.program.statement(name)
            head = f"{params_prefix(self.program.params)}{{ {name}[{', '.join(stmt.iters)}] -> "
            out = []
            for ld in [stmt.target] + loads(stmt.value):
                try:
                    idx = ", ".join(expr_to_isl(i) for i in ld.indices)
                except NotAffine:
                    continue
                out.append((ld, f"{head}{ld.buffer}[{idx}] }}",
                            all(_division_free(i) for i in ld.indices)))
            self._affine[name] = out
        return self._affine[name]

    def at_domain(self, node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        call = node.user_get_expr()
        name = call.op_get_arg(0).get_id().get_name()
        plain_args = all(_isl_division_free(call.op_get_arg(k))
                         for k in range(1, call.op_get_n_arg()))
        inverse = None
        found: dict[int, list[isl.AstExpr]] = {}
        for k, (ld, relation, plain) in enumerate(self._accesses(name)):
            if plain and plain_args:
                continue
            if inverse is None:
                inverse = isl.PwMultiAff.from_map(
                    isl.Map.from_union_map(build.get_schedule()).reverse())
            idx = isl.PwMultiAff.from_map(map_(relation)).pullback_pw_multi_aff(inverse)
            key = -1 if k == 0 else id(ld)
            found[key] = [build.expr_from_pw_aff(idx.get_pw_aff(d))
                          for d in range(idx.dim(isl.dim_type.out))]
        self.found.append(found)
        return node.set_annotation(isl.Id(f"U{len(self.found) - 1}"))


_LINEAR = (BinOpKind.ADD, BinOpKind.SUB, BinOpKind.MUL)
_ISL_LINEAR = (isl.ast_expr_op_type.add, isl.ast_expr_op_type.sub, isl.ast_expr_op_type.mul,
               isl.ast_expr_op_type.minus)


def _division_free(e: Expr) -> bool:
    return all(isinstance(n, (Var, Const)) or (isinstance(n, BinOp) and n.op in _LINEAR)
               for n in walk(e))


def _isl_division_free(e: isl.AstExpr) -> bool:
    if e.get_type() != isl.ast_expr_type.op:
        return True
    return e.op_get_type() in _ISL_LINEAR and all(
        _isl_division_free(e.op_get_arg(k)) for k in range(e.op_get_n_arg()))

