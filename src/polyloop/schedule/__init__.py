# SPDX-License-Identifier: Apache-2.0
"""L3: schedules — loop trees, primitives with exact legality checks, and traces."""
from .schedule import Schedule
from .trace import BlockHandle, LoopHandle, Trace

__all__ = ["Schedule", "BlockHandle", "LoopHandle", "Trace"]
