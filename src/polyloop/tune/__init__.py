# SPDX-License-Identifier: Apache-2.0
"""L7 tune: spaces of schedules drawn with sampling primitives, random and evolutionary search
with a learned cost model, measurement in worker processes or on Ray, records in SQLite.

>>> from polyloop.tune import tune, TuneResult
"""
from .result import Progress, TuneResult
from .space import generated_space
from .tuner import tune

__all__ = ["Progress", "TuneResult", "generated_space", "tune"]
