# SPDX-License-Identifier: Apache-2.0
"""Checks of the plain arguments of schedule primitives (counts, types, duplicates, names).

Each check runs before a primitive changes anything, so a refusal leaves the schedule as it
was, and says which argument is wrong and what is expected.

>>> integer("rfactor", "factor_axis", True, minimum=0)
Traceback (most recent call last):
    ...
polyloop.errors.ScheduleError: rfactor: factor_axis must be an integer >= 0, got True (bool)
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from ..errors import ScheduleError
from ..poly.isl_util import ISL_KEYWORDS
from .trace import LoopHandle

# larger constants leave no room in the 64-bit index arithmetic of the generated code
MAX_CONSTANT = 2**62
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def integer(primitive: str, what: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` if it is an int (not a bool) within ``minimum .. 2**62``, else ScheduleError."""
    ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_CONSTANT
    if ok and minimum is not None:
        ok = value >= minimum
    if not ok:
        want = "an integer" + (f" >= {minimum}" if minimum is not None else "")
        if isinstance(value, int) and abs(value) > MAX_CONSTANT:
            want += " of at most 2**62 in size"
        raise ScheduleError(f"{primitive}: {what} must be {want}, got {value!r:.60} "
                            f"({type(value).__name__})")
    return value


def distinct_loops(primitive: str, loops: Sequence[Any], *, at_least: int) -> None:
    """At least ``at_least`` loop handles, none listed twice (a loop is one handle)."""
    if len(loops) < at_least:
        count = {1: "one loop", 2: "two loops"}.get(at_least, f"{at_least} loops")
        raise ScheduleError(f"{primitive} needs at least {count} from get_loops/split/..., "
                            f"got {len(loops)}")
    seen: set[int] = set()
    for x in loops:
        if isinstance(x, LoopHandle):
            if x.id in seen:
                raise ScheduleError(f"{primitive}: loop '{x.name}' is listed twice; each loop "
                                    "may appear once")
            seen.add(x.id)


def loop_name(primitive: str, name: Any) -> str:
    """A name for a new loop: an ASCII identifier that is no isl keyword."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name in ISL_KEYWORDS:
        raise ScheduleError(f"{primitive}: a loop name must be an ASCII identifier (letters, "
                            f"digits, underscores; not an isl keyword), got {name!r:.60}")
    return name


def loop_names(primitive: str, names: Any) -> list[str] | None:
    """``None``, or a list of distinct loop names."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ScheduleError(f"{primitive}: names must be a list of loop names, got {names!r:.60}")
    out = [loop_name(primitive, n) for n in names]
    if len(set(out)) != len(out):
        raise ScheduleError(f"{primitive}: a loop name is given twice in {out}; names must differ")
    return out


def factor_list(primitive: str, factors: Any) -> list[Any]:
    """The factors of a split as a list; the split itself checks that they are positive."""
    if isinstance(factors, (str, bytes)) or not isinstance(factors, (list, tuple)):
        raise ScheduleError(f"{primitive}: factors must be a list like [None, 8], got "
                            f"{factors!r:.60}" + ("; for one trip count write factor=k (inner) "
                                                  "or nparts=k (outer)"
                                                  if isinstance(factors, int) else ""))
    for f in factors:
        if isinstance(f, int) and f > MAX_CONSTANT:
            raise ScheduleError(f"{primitive}: factor {f} is larger than 2**62")
    return list(factors)


def annotation(primitive: str, key: Any, value: Any) -> tuple[str, str]:
    """An annotation's key (a non-empty word) and value (text or a number) as text."""
    if not isinstance(key, str) or not _NAME.fullmatch(key):
        raise ScheduleError(f"{primitive}: the key must be a word (letters, digits, "
                            f"underscores), got {key!r:.60}")
    if not isinstance(value, (str, int, float)):
        raise ScheduleError(f"{primitive}: the value of '{key}' must be a string or a number, "
                            f"got {type(value).__name__}")
    return str(key), str(value)    # str(): a NoteKey member as its text
