# SPDX-License-Identifier: Apache-2.0
"""What ``polyloop tune FILE.py:FUNCTION`` runs: load the program from the user's file, tune
it with a progress bar (trials, best time and GFLOP/s, ETA), print the best schedule.

>>> from polyloop.tune.command import load_program
>>> load_program("no_such_file.py:f")   # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
PolyloopError: polyloop tune: no file no_such_file.py
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import PolyloopError
from ..ir.program import Program
from .result import Progress, TuneResult
from .tuner import tune


def load_program(spec: str) -> Any:
    """``FILE.py:NAME``: the object NAME of the file (a Program, e.g. from ``@pl.script``, a
    kernel, output tensors), or what NAME returns when it is a function of no arguments."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not name or not path_text.endswith(".py"):
        raise PolyloopError(f"polyloop tune: give FILE.py:FUNCTION, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise PolyloopError(f"polyloop tune: no file {path}")
    module_spec = importlib.util.spec_from_file_location(f"_polyloop_tune_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise PolyloopError(f"polyloop tune: cannot load {path} as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(path.parent.resolve()))   # the file may import its neighbours
    try:
        module_spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise PolyloopError(f"polyloop tune: {path} defines no {name!r}")
    obj = getattr(module, name)
    if callable(obj) and not isinstance(obj, Program) and not hasattr(obj, "to_program"):
        obj = obj()
    return obj


def tune_with_progress(obj: Any, *, trials: int, work_dir: str | None, out: TextIO,
                       **options: Any) -> TuneResult:
    """``pl.tune`` with a tqdm progress bar on ``out``."""
    try:
        from tqdm import tqdm
    except ImportError:
        raise PolyloopError("the progress bar needs tqdm: pip install polyloop[tune]") from None
    bar = tqdm(total=trials, unit="trial", file=out, dynamic_ncols=True)

    def show(p: Progress) -> None:
        bar.n = p.trials
        if p.best_seconds:
            speed = f", {p.gflops:.1f} GFLOP/s" if p.gflops else ""
            bar.set_postfix_str(f"best {p.best_seconds * 1e3:.3g} ms{speed}", refresh=False)
        bar.refresh()
    try:
        return tune(obj, trials=trials, work_dir=work_dir, progress=show, **options)
    finally:
        bar.close()
