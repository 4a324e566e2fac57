# SPDX-License-Identifier: Apache-2.0
"""The learned cost model: gradient-boosted trees (XGBoost) from schedule features to the log
of the run time, retrained as measurements arrive. Without xgboost (``pip install
polyloop[tune]``) the model ranks nothing and the search explores at random, with a warning.

>>> from polyloop.tune.cost_model import CostModel
>>> m = CostModel()
>>> m.predict([[0.0, 1.0]])           # untrained: every candidate ties
[0.0]
"""
from __future__ import annotations

import logging
import math
from typing import Sequence

log = logging.getLogger("polyloop.tune")

MIN_RECORDS = 8   # fewer measurements teach the trees nothing


class CostModel:
    """Predicts a score per feature vector, higher meaning faster. One model may learn from
    several programs (``group``: one per program, as ``pl.graph.tune``'s tasks share one):
    each time is taken relative to the best of its group, so that a slow program's
    candidates do not all look worse than a fast one's (only the order within a program
    matters to the search)."""

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._booster = None
        self._xs: list[list[float]] = []
        self._seconds: list[float] = []
        self._groups: list[str] = []
        self._warned = False

    def update(self, xs: Sequence[Sequence[float]], seconds: Sequence[float],
               group: str = "") -> None:
        """Add measurements (successful candidates only) of programs ``group`` and retrain."""
        for x, t in zip(xs, seconds):
            self._xs.append(list(x))
            self._seconds.append(t)
            self._groups.append(group)
        if len(self._seconds) >= MIN_RECORDS:
            self._train()

    def _labels(self) -> list[float]:
        """-log of each time over its group's best (0 for the best of each group)."""
        best: dict[str, float] = {}
        for t, g in zip(self._seconds, self._groups):
            best[g] = min(best.get(g, t), t)
        return [-math.log(t / best[g]) for t, g in zip(self._seconds, self._groups)]

    def _train(self) -> None:
        try:
            import xgboost as xgb
        except ImportError:
            if not self._warned:
                log.warning("xgboost is not installed (pip install polyloop[tune]): the "
                            "evolutionary search ranks candidates at random")
                self._warned = True
            return
        import numpy as np
        dtrain = xgb.DMatrix(np.asarray(self._xs, dtype=np.float32),
                             label=np.asarray(self._labels(), dtype=np.float32))
        params = {"max_depth": 6, "eta": 0.2, "objective": "reg:squarederror",
                  "seed": self.seed, "nthread": 1, "verbosity": 0}
        self._booster = xgb.train(params, dtrain, num_boost_round=50)

    def predict(self, xs: Sequence[Sequence[float]]) -> list[float]:
        if self._booster is None or not xs:
            return [0.0] * len(xs)
        import numpy as np
        import xgboost as xgb
        return [float(v) for v in self._booster.predict(
            xgb.DMatrix(np.asarray(xs, dtype=np.float32)))]
