# SPDX-License-Identifier: Apache-2.0
"""``polyloop demo`` shows the whole path and refuses wrong answers; ``polyloop version``."""
from __future__ import annotations

import dataclasses
import os
import linecache
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from polyloop import cli, ops
from polyloop.ops.knobs import default_lanes

SECTIONS = ["## algorithm", "## schedule", "## scheduled program", "## generated C",
            "## check against NumPy", "## time"]


def run_demo(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["demo", "--repeat", "1", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("size", [1, 7, 37])
def test_demo_prints_every_section_for_both_workloads(capsys, size):
    status, out, err = run_demo(capsys, "--size", str(size))
    assert status == 0, err
    assert err == ""
    workloads = out.split("=" * 96)
    assert "[1/2] matmul + ReLU" in out and "[2/2] softmax over rows" in out
    for title, body in [("matmul", workloads[2]), ("softmax", workloads[4])]:
        positions = [body.find(s) for s in SECTIONS]
        assert -1 not in positions, f"{title}: missing {SECTIONS[positions.index(-1)]}"
        assert positions == sorted(positions), f"{title}: sections out of order"
    assert out.rstrip().endswith("polyloop demo: all results match NumPy.")


def test_demo_shows_the_schedule_the_loops_and_the_c(capsys):
    status, out, _ = run_demo(capsys, "--size", "130")
    assert status == 0
    lanes = default_lanes("float32")     # the ops schedules' default: the host's vector width
    nr = 4 * lanes
    assert "## schedule (polyloop.ops.schedule_matmul_relu" in out
    assert re.search(rf"sch\.split\(\w+, factors=\[None, 4, {lanes}\]\)", out)  # the trace
    assert f"for j_0 in parallel({-(-130 // nr)}):" in out                      # print(sch)
    assert f"B_packed[j_0, ax0, -({nr} * j_0) + ax1] = B[ax0, ax1]" in out
    assert re.search(r"for j_2 in vectorized\(", out)
    assert "int32_t D_kernel(void **args, const int64_t *params)" in out   # mod.source
    assert "int32_t softmax_kernel(void **args, const int64_t *params)" in out
    assert out.count("#pragma omp parallel for") == 2
    assert "explicit vectors of" in out and "typedef float v" in out


def test_demo_checks_both_schedules_against_numpy(capsys):
    _, out, _ = run_demo(capsys, "--size", "16")
    checks = re.findall(r"^polyloop, (hand|default) schedule +max abs error (\S+) .* (OK|WRONG)$",
                        out, flags=re.M)
    assert [c[0] for c in checks] == ["hand", "default"] * 2
    assert all(status == "OK" and float(err) < 1e-4 for _, err, status in checks)


def test_demo_time_table_has_numpy_first_and_throughput_units(capsys):
    _, out, _ = run_demo(capsys, "--size", "16")
    rows = re.findall(r"^  (NumPy \d\S*|polyloop, \w+ schedule) +(\S+ \S+) +(\S+) +(\S+)x$",
                      out, flags=re.M)
    assert [r[0][:5] for r in rows] == ["NumPy", "polyl", "polyl"] * 2
    assert rows[0][3] == "1.00" and rows[3][3] == "1.00"   # NumPy against itself
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)
    assert re.search(r"time +GFLOP/s +vs NumPy", out)
    assert re.search(r"time +GB/s +vs NumPy", out)


def test_demo_fails_loudly_when_a_result_is_wrong(capsys, monkeypatch):
    def off_by_one(*arrays):
        return cli.demo.numpy_matmul_relu(*arrays) + 1

    wrong = dataclasses.replace(cli.CASES[0], reference=off_by_one)
    monkeypatch.setattr(cli, "CASES", (wrong, cli.CASES[1]))
    status, out, err = run_demo(capsys, "--size", "8")
    assert status == 1
    assert "FAILED: matmul + ReLU: polyloop, hand schedule and polyloop, default schedule" in err
    assert re.search(r"^polyloop, hand schedule +max abs error 1.00e\+00 .* WRONG$", out, re.M)
    assert "1 of 2 workloads gave wrong results" in err
    assert "all results match NumPy" not in out
    assert "[2/2] softmax over rows" in out      # the other workload still runs


def test_check_accepts_float32_rounding_and_rejects_a_wrong_value():
    case = cli.CASES[1]
    want = np.full((4, 4), 0.25, np.float32)
    ok, line = cli.demo.check("x", want + np.float32(1e-8), want, case)
    assert ok and line.endswith("OK")
    ok, line = cli.demo.check("x", want + np.float32(1e-3), want, case)
    assert not ok and "max abs error 1.00e-03" in line and line.endswith("WRONG")
    ok, _ = cli.demo.check("x", np.full((4, 4), np.nan, np.float32), want, case)
    assert not ok


def test_demo_schedules_are_the_operator_library_s():
    assert [c.schedule for c in cli.CASES] == [ops.schedule_matmul_relu, ops.schedule_softmax]
    for module in (cli, cli.demo):
        assert not hasattr(module, "schedule_softmax")
        assert not hasattr(module, "schedule_matmul_relu")


def test_hand_schedules_are_size_generic():
    # the demo's schedules also work on symbolic sizes: one module for every n
    import polyloop as pl
    mod = pl.build(cli.CASES[1].schedule(cli.demo.softmax(pl.var("n"))))
    for n in (1, 5, 33):
        x = np.random.default_rng(n).standard_normal((n, n), dtype=np.float32)
        np.testing.assert_allclose(mod(x), cli.demo.numpy_softmax(x), rtol=1e-5, atol=1e-6)


def test_version_names_polyloop_numpy_and_the_compiler(capsys):
    assert cli.main(["version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"polyloop {metadata.version('polyloop')} | python ")
    assert f"numpy {np.__version__}" in out and "islpy" in out


@pytest.mark.parametrize("argv", [[], ["demo", "--size", "0"], ["demo", "--size", "x"],
                                  ["bench", "--repeat", "0"]])
def test_bad_command_lines_exit_with_usage(capsys, argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage: polyloop" in capsys.readouterr().err


def test_console_script_points_at_main():
    (script,) = [e for e in metadata.entry_points(group="console_scripts") if e.name == "polyloop"]
    assert script.value == "polyloop.cli:main"
    assert script.load() is cli.main


def test_python_dash_m_polyloop_runs_the_cli(tmp_path):
    env = dict(os.environ, POLYLOOP_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "polyloop", "demo", "--size", "9", "--repeat",
                           "1"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "all results match NumPy" in done.stdout


def test_demo_piped_into_head_stops_quietly(tmp_path):
    env = dict(os.environ, POLYLOOP_CACHE_DIR=str(tmp_path))
    command = f"'{sys.executable}' -m polyloop demo --size 8 --repeat 1 | head -n 1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.stdout.startswith("polyloop ")
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr


# --- the README is part of the interface: its commands and its tour must stay true ---------------

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    text = README.read_text()
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first and text.index(first.group(0)) < text.index("## "), \
        "the README must show the install-and-run commands before its first section"
    demo, tests = first.group(1).strip().splitlines()
    assert demo.endswith("&& polyloop demo")
    assert "pytest" in tests
    assert tests in (README.parent / ".ci" / "run").read_text()


def test_readme_tour_runs_and_prints_what_it_shows(capsys):
    text = README.read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))
    # registered so that pl.script can read the source of the functions the tour defines
    linecache.cache["<README>"] = (len(code), None, code.splitlines(True), "<README>")
    exec(compile(code, "<README>", "exec"), {})
    out = capsys.readouterr().out
    shown = re.search(r"print\(sch\)\n```\n```\n(.*?)```", text, re.S).group(1)
    assert shown in out, "the README shows a different print(sch) than the tour prints"
    assert "cannot parallelize loop 'k': it carries the RAW dependence C -> C" in out
    assert "inconsistent size 'n' in D_kernel()" in out
