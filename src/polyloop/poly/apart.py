# SPDX-License-Identifier: Apache-2.0
"""Whether two accesses of a loop nest can meet: the same element at some iteration (isl).

Register promotion keeps one element of a buffer in a register across a loop; another access
to the same buffer inside that loop is harmless only when it never touches that element. The
question is exact for affine indices and loop bounds: the set of iterations (each loop within
its bounds, the sizes free) where the two index tuples are equal must be empty. Bounds isl
cannot represent are left out (the set only grows: a "no" stays safe).
"""
from __future__ import annotations

from typing import Sequence

import islpy as isl

from ..ir.expr import Expr, free_vars
from .isl_util import NotAffine, expr_to_isl, isl_name

# (variable, start, stop): start <= variable < stop
Bound = tuple[str, Expr, Expr]


def never_equal(first: Sequence[Expr], second: Sequence[Expr], loops: Sequence[Bound]) -> bool:
    """Whether the index tuples ``first`` and ``second`` differ at every point where each loop
    variable of ``loops`` lies within its bounds (every other name is a size, any value).
    False when it cannot be shown (an index isl cannot represent).

    >>> from polyloop.ir.expr import Var, const
    >>> i, j, k, n, zero = Var("i"), Var("j"), Var("k"), Var("n"), const(0)
    >>> loops = [("i", zero, n), ("j", zero, i), ("k", zero, j)]
    >>> never_equal((i, j), (i, k), loops)          # A[i][j] and A[i][k], k < j
    True
    >>> never_equal((i, j), (j, k), loops)          # A[i][j] and A[j][k], j < i
    True
    >>> never_equal((i,), (k,), [("i", zero, n), ("k", zero, n)])  # X[i] and X[k]
    False
    """
    names = [v for v, _, _ in loops]
    used = set().union(*(free_vars(e) for e in (*first, *second)),
                       *(free_vars(e) for _, a, b in loops for e in (a, b)))
    if (len(first) != len(second) or len(set(names)) != len(names)
            or any(isl_name(v) != v for v in used | set(names))):
        return False    # a name isl would read otherwise: not shown, so not proven
    try:
        constraints = [f"{expr_to_isl(a)} = {expr_to_isl(b)}" for a, b in zip(first, second)]
    except NotAffine:
        return False
    for var, start, stop in loops:
        try:
            constraints.append(f"{expr_to_isl(start)} <= {var} < {expr_to_isl(stop)}")
        except NotAffine:
            continue    # left out: the set only grows
    params = sorted(used - set(names))
    head = f"[{', '.join(params)}] -> " if params else ""
    text = f"{head}{{ [{', '.join(names)}] : {' and '.join(constraints) or 'true'} }}"
    try:
        return bool(isl.Set(text).is_empty())
    except isl.Error:
        return False
