# SPDX-License-Identifier: Apache-2.0
"""Guarded loads and gcc's loop if-conversion.

A value read under a condition, ``c ? x[i - 2] : 0.0f`` (a padding, a concatenation, a pooling
window at the border), is a *guarded load*: the condition keeps the read inside the array.
gcc 12 at ``-O3`` with AVX2 or AVX-512 turns such a loop into masked vector loads and, for some
loop nests, gets the result wrong: an 8 x 12 x 12 array padded by two rows, written as the
select above in three loops of constant extent, comes back with 576 of its 1,536 elements
wrong (57 of 180 small pad shapes tried were wrong; the same loops written as a conditional
store, or compiled without loop if-conversion, are right). So a C function whose scalar code
has a guarded load is compiled without loop if-conversion. Loops that polyloop vectorizes
itself are not affected (explicit vector code uses masked intrinsics, not gcc's
if-conversion), and gcc still vectorizes the function's loops that need no if-conversion.
"""
from __future__ import annotations

from ..ir.expr import Expr, Load, Select
from ..ir.loops import Kernel, Store, iter_nodes
from ..ir.traverse import children, same, walk

# The attribute that turns loop if-conversion off for one function (the command line's other
# options, -fwrapv and -march among them, still apply).
NO_IF_CONVERSION = 'optimize("no-tree-loop-if-convert")'


def has_guarded_load(e: Expr) -> bool:
    """Whether an arm of a select in ``e`` reads memory that ``e`` does not also read
    unconditionally (outside every arm).

    >>> from polyloop.ir.dtypes import DType
    >>> from polyloop.ir.expr import Const, Load, Select, Var
    >>> i, f32 = Var("i"), DType.FLOAT32
    >>> has_guarded_load(Select(i >= 2, Load("x", (i - 2,), f32), Const(0.0, f32), f32))
    True
    >>> x = Load("x", (i,), f32)
    >>> has_guarded_load(Select(x > 0.0, x, Const(0.0, f32), f32))
    False
    """
    guarded = [m for n in walk(e) if isinstance(n, Select)
               for arm in (n.true_value, n.false_value) for m in walk(arm) if isinstance(m, Load)]
    if not guarded:
        return False
    always = [n for n in _outside_arms(e) if isinstance(n, Load)]
    return any(not any(same(g, a) for a in always) for g in guarded)


def _outside_arms(e: Expr):
    """The nodes of ``e`` evaluated whatever every select decides."""
    yield e
    kids = [e.cond] if isinstance(e, Select) else children(e)
    for k in kids:
        yield from _outside_arms(k)


def needs_no_if_conversion(kernel: Kernel) -> bool:
    """Whether some store of ``kernel`` computes its value with a guarded load."""
    return any(isinstance(n, Store) and (has_guarded_load(n.value)
                                         or any(has_guarded_load(i) for i in n.indices))
               for n in iter_nodes(kernel.body))
