# SPDX-License-Identifier: Apache-2.0
"""``pl.tune`` on PolyBench kernels as written: a handful of trials at one set of sizes (none
dividing a tile), then the best schedule built and run at other sizes (the schedules stay
symbolic in the sizes) against Python running the same function; the untuned decision is the
tuner's first point."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.tune.space import auto_schedule_seed

from .kernels import gemver, lu
from .test_kernels import VALUES, _inputs

TUNED_AT = {"n": 37}
RUN_AT = [{"n": 45}, {"n": 2}]


def _python(fn, arrays, values, sizes):
    args = {**sizes, **values, **arrays}
    fn(*[args[name] for name in fn.__code__.co_varnames[:fn.__code__.co_argcount]])


@pytest.mark.parametrize("fn", [gemver, lu], ids=lambda f: f.__name__)
def test_tuned_schedule_is_correct_at_other_sizes(fn, rng, tmp_path):
    prog = pl.script(fn)
    sizes = {p: TUNED_AT[p] for p in prog.params}
    res = pl.tune(prog, trials=3, sizes=sizes, work_dir=str(tmp_path), seed=3)
    assert not [r for r in res.history if r.status is Status.MISMATCH]
    # the seeds come first, in a round of their own: auto_schedule's decision, the loops as
    # written; the search's proposals follow (mutations of the fastest of them)
    seed = auto_schedule_seed(prog)
    assert res.history[0].trace == seed.trace.to_json()
    assert res.history[1].trace == "[]"
    assert res.seconds <= min(r.seconds for r in res.history[:2] if r.seconds is not None)
    mod = res.build()
    for at in RUN_AT:
        run_sizes = {p: at[p] for p in prog.params}
        arrays = _inputs(prog, rng, run_sizes)
        values = {a: VALUES[a] for a in prog.args if prog.buffer(a).ndim == 0}
        expected = {k: v.copy() for k, v in arrays.items()}
        _python(fn, expected, values, run_sizes)
        got = {k: v.copy() for k, v in arrays.items()}
        mod(**got, **values, **run_sizes)
        for name in got:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-9, atol=1e-12,
                                       err_msg=f"{fn.__name__} at {run_sizes}: {name}\n"
                                               f"{res.trace}")
