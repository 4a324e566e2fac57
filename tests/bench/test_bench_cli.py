# SPDX-License-Identifier: Apache-2.0
"""Smoke test of ``polyloop bench --quick``: tiny workloads that divide no tile, NumPy as the only
reference (no PyTorch or TVM needed), no timing assertions."""
from __future__ import annotations

import json

import pytest

from polyloop import bench
from polyloop.bench.goals import at_least
from polyloop.bench.run import Record
from polyloop.cli import main


def test_quick_bench_prints_one_json_record_per_workload(capsys):
    assert main(["bench", "--quick", "--json", "--repeat", "1", "--rounds", "1",
                 "--peers", "numpy", "--no-limits", "matmul", "bmm-relu"]) == 0
    out, err = capsys.readouterr()
    records = json.loads(out)
    assert [r["workload"] for r in records] == ["matmul", "bmm-relu"]
    for r in records:
        assert set(r) >= {"workload", "shape", "polyloop_s", "reference_s", "gflops"}
        assert r["polyloop_s"] > 0 and r["gflops"] > 0
        assert r["reference_s"]["numpy"] > 0
        assert r["reference_s"]["torch"] is None and r["reference_s"]["tvm"] is None
    assert "round 1/1: [2/2] bmm-relu" in err          # the progress lines go to stderr


def test_quick_bench_table_lists_every_workload(capsys):
    assert main(["bench", "--quick", "--repeat", "2", "--rounds", "1", "--peers", "numpy",
                 "--stat", "min"]) == 0
    out = capsys.readouterr().out
    assert "min of 2 timings" in out and "Times are least timings" in out
    for w in bench.QUICK:
        assert w.shape in out
    assert "Machine limits measured in this run: peak FP32 FMA" in out


def test_unknown_workload_and_peer_are_clear_errors(capsys):
    assert main(["bench", "--quick", "no-such-op"]) == 1
    assert "unknown workload(s) no-such-op; choose among" in capsys.readouterr().err
    assert main(["bench", "--quick", "--peers", "numpy,jax"]) == 1
    assert "unknown reference(s) ['jax']" in capsys.readouterr().err


def test_a_missing_reference_is_reported_not_installed():
    w = bench.QUICK[0]
    record = Record(w, polyloop_s=1e-3, reference_s={"torch": None, "numpy": 2e-3, "tvm": None},
                    notes={"torch": "not installed", "tvm": "not installed"})
    text = bench.table([record], None)
    assert text.count("not installed") == 2 and "2.00x" in text


@pytest.mark.parametrize("ratios, peak, verdict", [({"torch": 0.95}, 0.85, True),
                                                  ({"torch": 0.5}, 0.85, False),
                                                  ({"torch": None}, 0.85, None)])
def test_goal_verdicts(ratios, peak, verdict):
    assert at_least(torch=0.9, peak=0.8).judge(ratios=ratios, peak=peak, triad=None) is verdict


def test_plot_draws_speeds_relative_to_pytorch(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [Record(w, polyloop_s=1e-3, reference_s={"torch": 2e-3, "numpy": 3e-3, "tvm": None})
            for w in bench.QUICK[:2]]
    path = bench.plot(rows, tmp_path / "chart.png", title="test")
    assert path.stat().st_size > 1000
    with pytest.raises(bench.BenchFailure.__mro__[1], match="no workload has both"):
        bench.plot([Record(bench.QUICK[0], polyloop_s=1e-3)], tmp_path / "none.png", title="t")
