# SPDX-License-Identifier: Apache-2.0
"""The compile cache loads only what polyloop wrote there, and a compiler cannot hang a build.

Fake compilers are small shell scripts named by POLYLOOP_CC: one that hangs after writing part
of its output, one that reports success without writing anything.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from polyloop import config
from polyloop.errors import BuildError
from polyloop.runtime import compile_c
from polyloop.runtime.compiler import STATS

ANSWER = "int answer(void) { return 42; }\n"
OTHER = "int answer(void) { return 7; }\n"
ENTRY_FILES = [".lock", "kernel.c", "kernel.so", "kernel.so.sha256"]

# Passes everything to gcc, unless PL_FAKE_HANG names a file: then a compile (a command with
# -o) writes a partial output, its pid to that file, and sleeps.
HANGING_CC = """#!/bin/sh
out=""; prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
if [ -n "$PL_FAKE_HANG" ] && [ -n "$out" ]; then
    printf 'partial' > "$out"
    echo $$ > "$PL_FAKE_HANG"
    exec sleep 60
fi
exec gcc "$@"
"""

SILENT_CC = """#!/bin/sh
[ "$1" = "--version" ] && exec gcc --version
exit 0
"""


def fake_compiler(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def use(monkeypatch, **changes) -> None:
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, **changes))


def answer(path: Path) -> int:
    return ctypes.CDLL(str(path)).answer()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_cache_directory_is_created_private(fresh_cache):
    compile_c(ANSWER, name="answer")
    assert stat.S_IMODE(fresh_cache.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o775, 0o777, 0o757])
def test_a_cache_directory_others_can_write_is_refused(fresh_cache, mode):
    fresh_cache.mkdir()
    fresh_cache.chmod(mode)
    with pytest.raises(BuildError, match="writable by other users.*chmod 700"):
        compile_c(ANSWER, name="answer")


def test_a_cache_directory_of_another_user_is_refused(fresh_cache, monkeypatch):
    fresh_cache.mkdir(mode=0o700)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)
    with pytest.raises(BuildError, match="belongs to another user"):
        compile_c(ANSWER, name="answer")


def test_a_library_planted_in_an_entry_is_rebuilt_not_loaded(fresh_cache):
    mine = compile_c(ANSWER, name="answer")
    planted = compile_c(OTHER, name="answer")
    mine.path.write_bytes(planted.path.read_bytes())
    compiles = STATS.compiles
    again = compile_c(ANSWER, name="answer")
    assert not again.cache_hit and STATS.compiles == compiles + 1
    assert answer(again.path) == 42


def test_a_truncated_library_is_rebuilt(fresh_cache):
    lib = compile_c(ANSWER, name="answer")
    data = lib.path.read_bytes()
    lib.path.write_bytes(data[:len(data) // 2])
    again = compile_c(ANSWER, name="answer")
    assert not again.cache_hit and answer(again.path) == 42


def test_a_library_without_a_recorded_hash_is_rebuilt(fresh_cache):
    lib = compile_c(ANSWER, name="answer")
    lib.path.with_name("kernel.so.sha256").unlink()
    assert not compile_c(ANSWER, name="answer").cache_hit


def test_a_module_refuses_to_load_a_library_replaced_after_the_build(fresh_cache):
    from polyloop.runtime import Module
    lib = compile_c(ANSWER, name="answer")
    lib.path.write_bytes(compile_c(OTHER, name="answer").path.read_bytes())
    with pytest.raises(BuildError, match="not the one polyloop wrote"):
        Module(lib, entry="answer", args=(), params=(), source=ANSWER)


def test_a_compiler_that_succeeds_without_output_leaves_no_entry(fresh_cache, tmp_path,
                                                                monkeypatch):
    use(monkeypatch, cc=str(fake_compiler(tmp_path, SILENT_CC, "silent-cc")))
    with pytest.raises(BuildError, match="wrote no library"):
        compile_c(ANSWER, name="answer")
    entry = next(fresh_cache.glob("answer-*"))
    assert sorted(p.name for p in entry.iterdir()) == [".lock", "kernel.c"]


def test_a_hanging_compiler_is_stopped_with_a_build_error(fresh_cache, tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    use(monkeypatch, cc=str(fake_compiler(tmp_path, HANGING_CC, "hanging-cc")),
        compile_timeout=1.0)
    monkeypatch.setenv("PL_FAKE_HANG", str(pid_file))
    start = time.monotonic()
    with pytest.raises(BuildError, match="did not finish within 1 s.*POLYLOOP_COMPILE_TIMEOUT"):
        compile_c(ANSWER, name="answer")
    assert time.monotonic() - start < 30
    assert not alive(int(pid_file.read_text()))
    entry = next(fresh_cache.glob("answer-*"))
    assert sorted(p.name for p in entry.iterdir()) == [".lock", "kernel.c"]


KILLED_BUILD = """
from polyloop.runtime import compile_c
compile_c({source!r}, name="answer")
"""


def test_a_build_killed_midway_leaves_no_stray_files(fresh_cache, tmp_path, monkeypatch):
    cc = fake_compiler(tmp_path, HANGING_CC, "hanging-cc")
    pid_file = tmp_path / "pid"
    env = dict(os.environ, POLYLOOP_CACHE_DIR=str(fresh_cache), POLYLOOP_CC=str(cc),
               PL_FAKE_HANG=str(pid_file))
    child = subprocess.Popen([sys.executable, "-c", KILLED_BUILD.format(source=ANSWER)], env=env)
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the fake compiler never started")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    os.kill(int(pid_file.read_text()), signal.SIGKILL)   # the orphaned compiler
    entry = next(fresh_cache.glob("answer-*"))
    assert any(p.name.startswith(".tmp-") for p in entry.iterdir())   # the partial output
    use(monkeypatch, cc=str(cc))
    lib = compile_c(ANSWER, name="answer")
    assert sorted(p.name for p in entry.iterdir()) == ENTRY_FILES
    assert answer(lib.path) == 42


def test_opencl_programs_are_cached_in_the_private_directory_too(fresh_cache):
    from polyloop.runtime.opencl import platform_available
    available, why = platform_available()
    if not available:
        pytest.skip(f"OpenCL unavailable: {why}")
    import polyloop as pl
    knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[i] = 3 * a[i]")
    fresh_cache.mkdir()
    fresh_cache.chmod(0o777)
    with pytest.raises(BuildError, match="writable by other users"):
        pl.build(knl, target="opencl")
    fresh_cache.chmod(0o700)
    mod = pl.build(knl, target="opencl")
    assert stat.S_IMODE((fresh_cache / "pyopencl").stat().st_mode) == 0o700
    a = np.arange(5, dtype="float32")
    np.testing.assert_array_equal(mod(a), 3 * a)
