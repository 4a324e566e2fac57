# SPDX-License-Identifier: Apache-2.0
"""``polyloop bench --profile``: the roofline line, the per-nest profile and perf's top symbols
(skipped with a reason where perf is missing). No timing assertions."""
from __future__ import annotations

import pytest

from polyloop.bench import profile as bench_profile
from polyloop.bench.limits import Limits
from polyloop.bench.profile import Roofline, _parse_report, perf_status
from polyloop.cli import main


def test_profile_quick_prints_roofline_and_nests(capsys):
    assert main(["bench", "--profile", "--quick", "--repeat", "1", "--peers", "numpy",
                 "--no-limits", "--no-perf", "matmul"]) == 0
    out = capsys.readouterr().out
    assert "## matmul-37x45x29" in out and "roofline: time" in out
    assert "no bound (limits not measured)" in out
    assert "profile of C_kernel" in out and "B_packed_in [ax0, ax1]" in out
    assert "reference: NumPy" in out and "timers: instrumented" in out
    assert "perf: skipped: not asked for" in out


def test_profile_samples_with_perf_or_says_why(capsys, monkeypatch):
    monkeypatch.setattr(bench_profile, "PERF_SECONDS", 0.5)
    assert main(["bench", "--profile", "--quick", "--repeat", "1", "--peers", "numpy",
                 "--no-limits", "softmax"]) == 0
    out = capsys.readouterr().out
    usable, why = perf_status()
    if usable:
        assert "perf record -e cpu-clock, polyloop" in out
        assert "perf record -e cpu-clock, NumPy" in out
        assert "softmax_kernel" in out          # the generated function, named by its symbol
    else:
        assert f"perf: skipped: {why}" in out


def test_perf_missing_is_reported(monkeypatch):
    monkeypatch.setattr(bench_profile.shutil, "which", lambda name: None)
    usable, why = perf_status()
    assert not usable and "perf is not installed" in why


def test_roofline_bound_is_the_larger_of_compute_and_memory():
    limits = Limits(2, "avx512", peak_gflops=100.0, triad_gbs=10.0)
    roof = Roofline(seconds=2e-3, flops=1e8, min_bytes=1e6, write_allocate_bytes=1.5e6,
                    limits=limits)
    assert roof.bound_s == pytest.approx(1e-3)          # compute: 1e8 / 1e11
    assert "compute" in roof.line() and "50% of the bound" in roof.line()


def test_perf_report_parsing_merges_unnamed_addresses():
    text = """# Overhead  Symbol  Shared Object
    40.00%  [.] C_kernel._omp_fn.0  kernel.so
    30.00%  [.] 0x000000000001de62  libgomp.so.1
    20.00%  [.] 0x000000000001e02a  libgomp.so.1
"""
    rows = _parse_report(text, 5)
    assert rows[0] == (50.0, "(2 unnamed addresses)", "libgomp.so.1")
    assert rows[1] == (40.0, "C_kernel._omp_fn.0", "kernel.so")
