# SPDX-License-Identifier: Apache-2.0
"""The argument declarations of ``pl.make_kernel`` (``args=[pl.ArrayArg(...), pl.ValueArg(...)]``).

>>> ArrayArg("a", "float32", shape=("n",)).shape
('n',)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ArrayArg:
    """An array argument: ``pl.ArrayArg("a", "float32", shape=("n", "n + 2"))``; a shape entry
    is an int, a size parameter, or an expression text; ``shape=None`` infers it.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = a[i] + a[i + 2]",
    ...                      [pl.ArrayArg("a", "float64", shape=("n + 2",)),
    ...                       pl.ArrayArg("out", "float64", shape=("n",))])
    >>> knl.program.args, [(b.name, str(b.dtype), b.shape) for b in knl.program.buffers]
    (('a', 'out'), [('out', 'float64', (<Var n>,)), ('a', 'float64', (<BinOp n + 2>,))])
    """
    name: str
    dtype: Any = None
    shape: Any = None


@dataclass(frozen=True, slots=True)
class ValueArg:
    """A scalar argument. An integer one is a size parameter (bound from shapes or by name);
    a float one is a 0-d input array: ``pl.ValueArg("alpha", "float32")``.

    >>> import numpy as np, polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = alpha*a[i]",
    ...                      [pl.ArrayArg("a", "float32", shape=("n",)),
    ...                       pl.ArrayArg("out", "float32", shape=("n",)),
    ...                       pl.ValueArg("alpha", "float32"), pl.ValueArg("n")])
    >>> knl.program.args, knl.program.params
    (('a', 'out', 'alpha'), ('n',))
    >>> pl.build(knl)(a=np.arange(5, dtype="float32"), alpha=np.float32(3.0))
    array([ 0.,  3.,  6.,  9., 12.], dtype=float32)
    """
    name: str
    dtype: Any = "int32"


__all__ = ["ArrayArg", "ValueArg"]
