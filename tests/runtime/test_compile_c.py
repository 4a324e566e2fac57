# SPDX-License-Identifier: Apache-2.0
"""compile_c: flags, the on-disk cache, atomic writes and compiler errors."""
import ctypes
import dataclasses
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from polyloop import config
from polyloop.errors import BuildError
from polyloop.runtime import Library, compile_c
from polyloop.runtime.compiler import STATS

ANSWER = "int answer(void) { return 42; }\n"
BROKEN = "int broken(void) {\n    return undeclared_variable;\n}\n"
# a cache entry: the lock, the source, the library and its recorded hash
ENTRY_FILES = [".lock", "kernel.c", "kernel.so", "kernel.so.sha256"]


def call_answer(lib: Library) -> int:
    return ctypes.CDLL(str(lib.path)).answer()


def test_compile_writes_source_and_library_under_the_configured_cache(fresh_cache):
    lib = compile_c(ANSWER, name="answer")
    assert not lib.cache_hit
    assert lib.path.name == "kernel.so" and lib.source_path.name == "kernel.c"
    assert lib.path.parent == lib.source_path.parent
    assert lib.path.parent.parent == fresh_cache
    assert lib.source_path.read_text() == ANSWER
    assert call_answer(lib) == 42


def test_second_compile_of_the_same_source_does_not_run_the_compiler(fresh_cache):
    first = compile_c(ANSWER, name="answer")
    compiles = STATS.compiles
    second = compile_c(ANSWER, name="answer")
    assert STATS.compiles == compiles
    assert second.cache_hit and second.path == first.path
    assert call_answer(second) == 42


def test_cache_key_includes_the_flags(fresh_cache):
    plain = compile_c(ANSWER, name="answer")
    compiles = STATS.compiles
    fast = compile_c(ANSWER, name="answer", fast_math=True)
    assert STATS.compiles == compiles + 1
    assert not fast.cache_hit and fast.path != plain.path
    assert "-ffast-math" in fast.flags and "-ffast-math" not in plain.flags
    extra = compile_c(ANSWER, name="answer", extra_flags=("-DANSWER=1",))
    assert extra.flags[-1] == "-DANSWER=1" and extra.path not in (plain.path, fast.path)


def test_default_flags():
    lib = compile_c(ANSWER, name="answer")
    assert lib.flags == ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11",
                         "-fwrapv")


def test_compile_leaves_no_temporary_files(fresh_cache):
    lib = compile_c(ANSWER, name="answer")
    assert sorted(p.name for p in lib.path.parent.iterdir()) == ENTRY_FILES


def test_concurrent_compiles_of_one_source_all_get_a_working_library(fresh_cache):
    source = ANSWER + "int concurrent(void) { return 7; }\n"
    with ThreadPoolExecutor(4) as pool:
        libs = list(pool.map(lambda _: compile_c(source, name="answer"), range(4)))
    assert len({lib.path for lib in libs}) == 1
    assert all(call_answer(lib) == 42 for lib in libs)
    assert sorted(p.name for p in libs[0].path.parent.iterdir()) == ENTRY_FILES


def test_a_cache_hit_restores_a_deleted_source_file(fresh_cache):
    lib = compile_c(ANSWER, name="answer")
    lib.source_path.unlink()
    again = compile_c(ANSWER, name="answer")
    assert again.cache_hit and again.source_path.read_text() == ANSWER


def test_compiler_error_shows_the_message_and_the_source_path(fresh_cache):
    with pytest.raises(BuildError) as info:
        compile_c(BROKEN, name="broken")
    message = str(info.value)
    assert "undeclared_variable" in message and "error" in message
    source_path = next(fresh_cache.glob("broken-*/kernel.c"))
    assert str(source_path) in message
    assert source_path.read_text() == BROKEN
    assert not list(fresh_cache.glob("broken-*/*.so"))


def test_a_long_compiler_error_is_trimmed_to_its_first_lines(fresh_cache):
    source = "".join(f"int f{i}(void) {{ return missing_{i}; }}\n" for i in range(200))
    with pytest.raises(BuildError) as info:
        compile_c(source, name="many_errors")
    message = str(info.value)
    assert "missing_0" in message and "missing_199" not in message
    assert "more lines" in message and len(message) < 6000


def test_a_missing_compiler_is_a_build_error(fresh_cache, monkeypatch):
    monkeypatch.setattr(config, "CONFIG",
                        dataclasses.replace(config.CONFIG, cc="/nonexistent/polyloop-cc"))
    with pytest.raises(BuildError, match="POLYLOOP_CC"):
        compile_c(ANSWER, name="answer")


def test_an_unwritable_cache_is_a_build_error(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, cache_dir=blocker))
    with pytest.raises(BuildError, match="POLYLOOP_CACHE_DIR"):
        compile_c(ANSWER, name="answer")


FTZ_PROBE = """
import sys
import numpy as np
from polyloop.runtime import compile_c
lib = compile_c("float twice(float x) { return 2.0f * x; }", name="fastmath_probe",
                fast_math=True)
import ctypes
ctypes.CDLL(str(lib.path))
tiny = np.array([1e-39], dtype=np.float32)       # a float32 subnormal
sys.exit(0 if (tiny * np.float32(1.0))[0] != 0 else 3)
"""


def test_a_fast_math_library_does_not_flush_subnormals_in_the_whole_process(fresh_cache):
    # gcc links crtfastmath.o into -ffast-math shared libraries; loading one would set FTZ/DAZ
    # for the process (NumPy included). Run in a child so a failure cannot leak into this one.
    env = dict(os.environ, POLYLOOP_CACHE_DIR=str(config.CONFIG.cache_dir))
    done = subprocess.run([sys.executable, "-c", FTZ_PROBE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr or "subnormals were flushed to zero"


def test_a_fast_math_compile_error_still_shows_the_message(fresh_cache):
    with pytest.raises(BuildError, match="C compilation failed"):
        compile_c("int broken(void) { return }", name="broken_fast", fast_math=True)


def test_a_unit_compiled_ahead_is_linked_without_compiling_it_again(fresh_cache, monkeypatch):
    from polyloop.runtime import compiler
    from polyloop.runtime.compiler import compile_c_units, compile_unit
    compile_unit(ANSWER)
    runs = []
    real = compiler._compile
    monkeypatch.setattr(compiler, "_compile", lambda cc, args, src: (runs.append(args),
                                                                      real(cc, args, src))[1])
    lib = compile_c_units([(ANSWER, ()), ("int seven(void) { return 7; }\n", ())], name="two")
    assert call_answer(lib) == 42 and ctypes.CDLL(str(lib.path)).seven() == 7
    # one object compiled (the second unit) and one link: the first unit was found compiled
    assert sum("-c" in args for args in runs) == 1 and len(runs) == 2


def test_a_unit_compiled_ahead_reports_the_compilers_message(fresh_cache):
    from polyloop.runtime.compiler import compile_unit
    with pytest.raises(BuildError, match="undeclared_variable"):
        compile_unit(BROKEN)
