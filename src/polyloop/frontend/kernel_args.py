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
    is an int, a size parameter, or an expression text; ``shape=None`` infers it."""
    name: str
    dtype: Any = None
    shape: Any = None


@dataclass(frozen=True, slots=True)
class ValueArg:
    """A scalar argument. An integer one is a size parameter (bound from shapes or by name);
    a float one is a 0-d input array: ``pl.ValueArg("alpha", "float32")``."""
    name: str
    dtype: Any = "int32"


__all__ = ["ArrayArg", "ValueArg"]
