# SPDX-License-Identifier: Apache-2.0
"""Tuning from any script: the workers are ``python -m polyloop.tune.worker`` processes, so a
script without a main guard and ``python -c`` tune; a dead worker says how it died."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polyloop as pl
from polyloop.runtime.records import Status
from polyloop.tune.measure import BuildJob, LocalBuilder, LocalRunner, build_one
from polyloop.tune.workers import WorkerProcess

SRC = str(Path(pl.__file__).resolve().parents[1])

# the README's tour matmul and its tuning snippet, as a user saves them: no main guard
README_SNIPPET = """
import numpy as np, polyloop as pl

n = pl.var("n")
A = pl.placeholder((n, n), "float32", name="A")
B = pl.placeholder((n, n), "float32", name="B")
k = pl.reduce_axis((0, n), name="k")
C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")

res = pl.tune(C, trials=3, work_dir="tune-mm")    # C: the matmul of the tour, no schedule
mod = res.build()                                   # or later: pl.build(C, database="tune-mm")
a = np.random.rand(37, 37).astype("float32")
b = np.random.rand(37, 37).astype("float32")
assert np.allclose(mod(a, b), a @ b, rtol=1e-4)
print("tuned:", len(res.history), "candidates")
"""


def _python(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("how", ["script", "-c"])
def test_the_readme_tuning_snippet_runs_as_a_plain_script(tmp_path, how):
    if how == "script":
        (tmp_path / "tune_mm.py").write_text(README_SNIPPET)
        done = _python(["tune_mm.py"], tmp_path)
    else:
        done = _python(["-c", README_SNIPPET], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tuned: 3 candidates" in done.stdout
    assert (tmp_path / "tune-mm").is_dir()


def _crashing_program():
    boom = pl.extern("pl_test_boom", dtype="float32", args=["float32"],
                     source="#include <signal.h>\nstatic float pl_test_boom(float x) "
                            "{ if (x > 0.5f) raise(SIGSEGV); return x; }",
                     python=lambda x: x)          # a lambda: never pickled to a worker
    A = pl.placeholder((8,), "float32", name="A")
    return pl.compute((8,), lambda i: boom(A[i]), name="B")


def test_a_kernel_that_crashes_its_worker_is_a_failed_candidate_that_says_how(tmp_path):
    built = build_one(BuildJob(pl.Schedule(_crashing_program()).program, "[]"))
    assert built.kernel is not None, built.error
    runner = LocalRunner(timeout=60.0, repeat=1)
    runner.set_inputs({"A": np.ones(8, np.float32)}, {})
    try:
        ran = runner.run(built.kernel)
        assert ran.status is Status.RUN_ERROR
        assert "killed by SIGSEGV" in ran.error and "please report it" in ran.error
        runner.set_inputs({"A": np.zeros(8, np.float32)}, {})
        again = runner.run(built.kernel)            # a new worker takes over
        assert again.status is Status.OK
        np.testing.assert_array_equal(again.outputs["B"], np.zeros(8, np.float32))
    finally:
        runner.close()


def test_a_build_worker_sends_a_program_with_python_callbacks():
    builder = LocalBuilder(workers=1, timeout=120.0)
    try:
        [res] = builder.build([BuildJob(pl.Schedule(_crashing_program()).program, "[]")])
    finally:
        builder.close()
    assert res.status is Status.OK and res.kernel is not None, res.error


def test_a_killed_worker_says_which_signal_and_its_last_output():
    w = WorkerProcess()
    os.kill(w.proc.pid, signal.SIGKILL)
    try:
        why = w.death("build")
    finally:
        w.kill()
    assert "killed by SIGKILL" in why and f"pid {w.proc.pid}" in why


def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(tmp_path):
    script = tmp_path / "count_runs.py"
    script.write_text(textwrap.dedent(f"""
        import polyloop as pl
        from polyloop.tune.measure import BuildJob, LocalBuilder
        with open({str(tmp_path / "runs.txt")!r}, "a") as f:
            f.write("ran\\n")
        A = pl.placeholder((16,), "float32", name="A")
        B = pl.compute((16,), lambda i: A[i] * 2.0, name="B")
        builder = LocalBuilder(workers=2)
        results = builder.build([BuildJob(pl.Schedule(B).program, "[]")] * 3)
        builder.close()
        print([r.status.value for r in results])
        """))
    done = _python([str(script)], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "['ok', 'ok', 'ok']"
    assert (tmp_path / "runs.txt").read_text() == "ran\n"
