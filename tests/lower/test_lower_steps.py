# SPDX-License-Identifier: Apache-2.0
"""Lowering is a list of named steps: POLYLOOP_DUMP=lower prints each, and an error inside a
step names it."""
from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import polyloop as pl
from polyloop import config

# the module, not the function the package re-exports under the same name
lowering = importlib.import_module("polyloop.lower.lower")


def _two_stage(n):
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] * 2.0, name="B")
    return pl.compute((n,), lambda i: B[i] + 1.0, name="C")


@pytest.fixture
def dump_lower(monkeypatch):
    monkeypatch.setattr(config, "CONFIG",
                        dataclasses.replace(config.CONFIG, dump=frozenset({"lower"})))


def test_every_step_is_dumped_in_order(dump_lower, capsys):
    mod = pl.build(_two_stage(pl.var("n")))
    err = capsys.readouterr().err
    names = [step.name for step in lowering.STEPS]
    assert len(names) == 9 and len(set(names)) == 9
    positions = [err.index(f"# --- after {name}\n") for name in names]
    assert positions == sorted(positions)
    # before the loop AST exists the program is shown (its temporary B), then the loops
    assert "# temp   B: float32[n]" in err.split("# --- after build loop AST")[0]
    assert "for i in range(n):" in err.split("# --- after build loop AST")[1]
    a = np.random.rand(13).astype("float32")
    out = np.full(13, np.nan, "float32")
    mod(a, out)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)


def test_nothing_is_dumped_without_the_setting(capsys):
    assert "lower" not in config.CONFIG.dump
    pl.build(_two_stage(7))
    assert "# --- after" not in capsys.readouterr().err


def test_a_bug_inside_a_step_names_the_step(monkeypatch):
    def broken(program, root, body):
        raise KeyError("loop 3")
    monkeypatch.setattr(lowering, "apply_tensorize", broken)
    with pytest.raises(pl.PolyloopError, match=r"lowering step 'tensorize' failed: KeyError"):
        pl.build(_two_stage(7))


def test_a_polyloop_error_inside_a_step_keeps_its_type_and_names_the_step(monkeypatch):
    def refused(program, root, body):
        raise pl.BuildError("the nest no longer matches")
    monkeypatch.setattr(lowering, "apply_prefetch", refused)
    with pytest.raises(pl.BuildError, match="no longer matches") as info:
        pl.build(_two_stage(7))
    assert "raised in lowering step 'prefetch'" in info.value.__notes__
