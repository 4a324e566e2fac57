# SPDX-License-Identifier: Apache-2.0
"""``polyloop tune FILE.py:FUNCTION`` (progress bar, best trace, records resumed) and
``pl.viz.plot_tuning`` on a work directory."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.cli import main
from polyloop.runtime.records import Database, Record, Status

PROGRAM = '''
import polyloop as pl

def scale():
    A = pl.placeholder((300,), "float32", name="A")
    return pl.compute((300,), lambda i: A[i] * 2.0, name="B")
'''


def test_cli_tunes_a_function_of_a_file(tmp_path, capsys):
    pytest.importorskip("tqdm", reason="the progress bar needs the extra polyloop[tune]")
    src = tmp_path / "prog.py"
    src.write_text(PROGRAM)
    work = tmp_path / "work"
    assert main(["tune", f"{src}:scale", "--trials", "2", "--work-dir", str(work)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("best: ")
    assert "2/2" in err                     # the progress bar
    key = Database(work).workloads()[0]
    records = Database(work).records(key)
    assert len({r.trace for r in records}) == 2     # (the fastest are timed again at the end)
    # the best record's trace is printed; the default schedule (a seed the tuner measures
    # first) has no step, and says so
    best = min((r for r in records if r.seconds is not None), key=lambda r: r.seconds)
    assert ("sch." in out) == (best.trace != "[]")
    assert ("the default schedule" in out) == (best.trace == "[]")


def test_cli_refuses_a_bad_spec(tmp_path, capsys):
    assert main(["tune", "prog.py", "--trials", "1"]) == 1
    assert "FILE.py:FUNCTION" in capsys.readouterr().err
    (tmp_path / "p.py").write_text("x = 1\n")
    assert main(["tune", f"{tmp_path / 'p.py'}:scale"]) == 1
    assert "defines no 'scale'" in capsys.readouterr().err


def test_plot_tuning_draws_best_time_against_trials(tmp_path):
    pytest.importorskip("matplotlib", reason="pictures need the extra polyloop[viz]")
    db = Database(tmp_path)
    for t in (3e-3, 1e-3, None, 2e-3):
        db.add(Record("w", "[]", (t,) if t else (), Status.OK if t else Status.TIMEOUT))
    fig = pl.viz.plot_tuning(tmp_path, tmp_path / "t.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "trials"
    assert list(ax.lines[0].get_ydata()) == pytest.approx([3.0, 1.0, 1.0, 1.0])
    assert (tmp_path / "t.png").stat().st_size > 1000
    with pytest.raises(pl.PolyloopError, match="no records"):
        pl.viz.plot_tuning(tmp_path / "empty")
