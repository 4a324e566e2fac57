# SPDX-License-Identifier: Apache-2.0
"""The expression IR in one import: the node kinds (:mod:`.kinds`), the nodes with their
constructors and text form (:mod:`.nodes`) and the tree walks (:mod:`.traverse`).

Nodes compare by identity (``==`` builds an ``EQ`` expression, as in every tensor DSL);
use :func:`same` for structural equality.

>>> from polyloop.ir.expr import Var, same, substitute
>>> i = Var("i")
>>> print(substitute(i * 2 + 1, {"i": Var("j")}))
j * 2 + 1
"""
from __future__ import annotations

from .kinds import BinOpKind, ReduceKind, UnaryKind, VarKind
from .nodes import (BinOp, Cast, Const, Expr, ExprLike, Load, Reduce, Select, Unary, Var,
                    _node, as_expr, binop, cast, const, expr_to_str, reduce_identity, select,
                    unary)
from .traverse import (children, free_vars, loads, rewrite, rewrite_topdown, same, substitute,
                       walk)

__all__ = ["BinOp", "BinOpKind", "Cast", "Const", "Expr", "ExprLike", "Load", "Reduce",
           "ReduceKind", "Select", "Unary", "UnaryKind", "Var", "VarKind", "_node", "as_expr",
           "binop", "cast", "children", "const", "expr_to_str", "free_vars", "loads",
           "reduce_identity", "rewrite", "rewrite_topdown", "same", "select", "substitute",
           "unary", "walk"]
