# SPDX-License-Identifier: Apache-2.0
"""What the operator schedules share about their knobs: the default vector width and the check
that a knob is a positive integer.

>>> from polyloop.ops.knobs import check_knobs, default_lanes
>>> default_lanes("float32") >= 4
True
>>> check_knobs("schedule_x", mr=6, lanes=16)
"""
from __future__ import annotations

from .. import config
from ..errors import ScheduleError
from ..util.isa import host_isa


def default_lanes(dtype: str = "float32") -> int:
    """Elements of ``dtype`` in one vector register of the host (16 float32 with AVX-512)."""
    return host_isa(config.CONFIG.cc).lanes(dtype)


def check_knobs(who: str, **knobs: int) -> None:
    """Raise a ScheduleError naming ``who`` and the knob unless every value is an int >= 1."""
    for name, value in knobs.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScheduleError(f"{who}: {name} must be a positive integer, got {value!r}")
