# SPDX-License-Identifier: Apache-2.0
"""The isl text of the simple relations the schedule primitives start from.

Loop expressions and statement domains are kept as isl text in the loop tree and the
program; these functions are the one place that writes that text for the schedule, so that
no isl syntax is spelled outside ``poly``.

>>> iterator_expr("S", ("i", "j"), "j")
LoopExpr(text='{ S[i, j] -> [(j)] }')
>>> box_domain(("n",), "T", ("a", "b"), ("n", "4"))
'[n] -> { T[a, b] : 0 <= a < n and 0 <= b < 4 }'
"""
from __future__ import annotations

import re
from typing import Sequence

from .isl_util import params_prefix
from .loop_expr import LoopExpr

# Words of isl's set syntax that are not names of dimensions or parameters.
ISL_WORDS = frozenset({"and", "or", "not", "mod", "floor", "ceil", "min", "max", "exists",
                       "true", "false", "implies", "infty", "NaN"})
# A name of a dimension or parameter.
ISL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")


def iterator_expr(statement: str, iters: Sequence[str], value: str) -> LoopExpr:
    """The loop expression whose value is ``value`` (an iterator of the statement, or an
    affine text in them): ``{ S[i, j] -> [(value)] }``."""
    return LoopExpr(f"{{ {statement}[{', '.join(iters)}] -> [({value})] }}")


def instance_map(source: str, source_iters: Sequence[str], target: str,
                 target_iters: Sequence[str]) -> str:
    """The map from the instances of ``source`` to those of ``target`` with the same
    iterator values: ``{ S[i, j] -> T[i, j, k] }``."""
    return (f"{{ {source}[{', '.join(source_iters)}] -> "
            f"{target}[{', '.join(target_iters)}] }}")


def box_domain(params: Sequence[str], statement: str, iters: Sequence[str],
               extents: Sequence[str]) -> str:
    """The domain ``0 <= iters[k] < extents[k]`` (extents: isl texts of the sizes)."""
    box = " and ".join(f"0 <= {a} < {d}" for a, d in zip(iters, extents)) or "true"
    return f"{params_prefix(params)}{{ {statement}[{', '.join(iters)}] : {box} }}"
