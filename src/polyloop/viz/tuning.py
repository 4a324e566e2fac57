# SPDX-License-Identifier: Apache-2.0
"""A picture of a tuning run: the best run time so far against the number of trials, per
workload of a ``pl.tune`` work directory (failed candidates marked along the bottom).

>>> import polyloop as pl
>>> fig = pl.viz.plot_tuning("tune/")            # doctest: +SKIP
>>> fig.savefig("tuning.png")                    # doctest: +SKIP
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import PolyloopError
from ..runtime.records import Database, Status
from .iteration_space import _figure


def plot_tuning(work_dir: str | os.PathLike, path: str | os.PathLike | None = None) -> Any:
    """A matplotlib Figure of best time (log scale) against trials for each workload of
    ``work_dir``; with ``path``, also saved there (PNG)."""
    db = Database(work_dir)
    workloads = db.workloads()
    if not workloads:
        raise PolyloopError(f"plot_tuning: {db.path} holds no records; run pl.tune with "
                            "work_dir= first")
    fig = _figure((6.5, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    for key in workloads:
        best, xs, ys, failed = float("inf"), [], [], []
        for trial, rec in enumerate(db.records(key), start=1):
            if rec.seconds is not None and rec.seconds < best:
                best = rec.seconds
            if rec.status is not Status.OK:
                failed.append(trial)
            if best < float("inf"):
                xs.append(trial)
                ys.append(best * 1e3)
        line, = ax.step(xs, ys, where="post", label=f"workload {key[:8]}")
        if failed and ys:
            ax.plot(failed, [min(ys)] * len(failed), "x", color=line.get_color(), alpha=0.5)
    ax.set_yscale("log")
    ax.set_xlabel("trials")
    ax.set_ylabel("best run time (ms)")
    ax.set_title("pl.tune: best schedule so far (x: failed candidates)")
    ax.legend(fontsize="small")
    if path is not None:
        fig.savefig(Path(path), dpi=100, bbox_inches="tight")
    return fig
