# SPDX-License-Identifier: Apache-2.0
"""Compile C source into a shared library, cached on disk by content.

The cache key is the SHA-256 of the source, the flags and the compiler's version line, so a
source compiled once is never compiled again, by this process or any other. Each entry is a
directory holding ``kernel.c`` and ``kernel.so``; both are written to a temporary file in the
same directory and renamed into place, so concurrent processes never see a partial file.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import BuildError

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
LINK_FLAGS = ("-lm",)
LINK_ONLY_FLAGS = ("-shared", "-fPIC", "-fopenmp")   # the link step of a two-step build
SOURCE_NAME = "kernel.c"
LIBRARY_NAME = "kernel.so"

# gcc's diagnostics can run to thousands of lines; the first errors are the useful ones.
_MAX_ERROR_LINES = 40
_MAX_ERROR_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Library:
    """A compiled shared library and the source it came from."""

    path: Path
    source_path: Path
    cache_hit: bool
    flags: tuple[str, ...]


@dataclass(slots=True)
class CompileStats:
    """Process-wide counters: real compiler invocations and cache hits."""

    compiles: int = 0
    cache_hits: int = 0


STATS = CompileStats()

_VERSIONS: dict[str, str] = {}


def compile_c(source: str, *, name: str, fast_math: bool = False,
              extra_flags: tuple[str, ...] = ()) -> Library:
    """Compile C ``source`` into a shared library, or reuse the cached one.

    The compiler is ``config.CONFIG.cc`` (``POLYLOOP_CC``, default ``gcc``); the cache lives
    under ``config.CONFIG.cache_dir`` (``POLYLOOP_CACHE_DIR``). ``name`` labels the cache
    entry. Raises BuildError with the compiler's message and the source path on failure.

    >>> lib = compile_c("int answer(void) { return 42; }", name="answer")
    >>> lib.path.name
    'kernel.so'
    """
    cc = config.CONFIG.cc
    flags = BASE_FLAGS + (("-ffast-math",) if fast_math else ()) + tuple(extra_flags) \
        + config.CONFIG.cflags    # POLYLOOP_CFLAGS: e.g. -fsanitize=address,undefined
    key = _cache_key(source, flags + LINK_FLAGS + LINK_ONLY_FLAGS, compiler_version(cc))
    entry = config.CONFIG.cache_dir / f"{_safe(name)}-{key[:24]}"
    source_path, library_path = entry / SOURCE_NAME, entry / LIBRARY_NAME
    if library_path.exists():
        if not source_path.exists():
            _write_atomic(source_path, source)
        STATS.cache_hits += 1
        return Library(library_path, source_path, True, flags)
    try:
        entry.mkdir(parents=True, exist_ok=True)
        _write_atomic(source_path, source)
    except OSError as e:
        raise BuildError(f"cannot write the kernel cache entry {entry}: {e.strerror}; point "
                         "POLYLOOP_CACHE_DIR at a writable directory") from None
    _run_compiler(cc, flags, source_path, library_path)
    return Library(library_path, source_path, False, flags)


def vectorizes_negative_step_reductions_wrongly(cc: str) -> bool:
    """GCC 12.1 and 12.2 can vectorize a reduction reading memory backwards wrongly at -O3
    (fixed in 12.3); polyloop compiles such kernels without loop vectorization there."""
    version = compiler_version(cc)
    return "gcc" in version.lower() and re.search(r"\b12\.[12]\.\d+", version) is not None


def compiler_version(cc: str) -> str:
    """The first line of ``cc --version``, computed once per process and compiler."""
    if cc not in _VERSIONS:
        try:
            out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False)
        except OSError as e:
            raise BuildError(f"cannot run the C compiler '{cc}': {e.strerror}; install gcc or "
                             "point POLYLOOP_CC at a C compiler") from None
        lines = out.stdout.strip().splitlines()
        _VERSIONS[cc] = lines[0] if lines else cc
    return _VERSIONS[cc]


def _run_compiler(cc: str, flags: tuple[str, ...], source_path: Path, library_path: Path) -> None:
    """Compile and link ``source_path`` into ``library_path`` (atomically replaced).

    With ``-ffast-math``, gcc links ``crtfastmath.o`` into the library, whose constructor turns
    on flush-to-zero for the whole process as soon as the library is loaded (NumPy then rounds
    subnormals to 0). Such sources are therefore compiled to an object with the flags and linked
    in a second step without them."""
    fd, tmp = tempfile.mkstemp(dir=library_path.parent, prefix=".kernel-", suffix=".so")
    os.close(fd)
    STATS.compiles += 1
    try:
        if "-ffast-math" in flags:
            obj = tmp[:-3] + ".o"
            try:
                _run(cc, [cc, *(f for f in flags if f != "-shared"), "-c", "-o", obj,
                          str(source_path)], source_path)
                _run(cc, [cc, *LINK_ONLY_FLAGS, "-o", tmp, obj, *LINK_FLAGS], source_path)
            finally:
                if os.path.exists(obj):
                    os.unlink(obj)
        else:
            _run(cc, [cc, *flags, "-o", tmp, str(source_path), *LINK_FLAGS], source_path)
    except BuildError:
        os.unlink(tmp)
        raise
    os.replace(tmp, library_path)


def _run(cc: str, command: list[str], source_path: Path) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as e:
        raise BuildError(f"cannot run the C compiler '{cc}': {e.strerror}; install gcc or "
                         "point POLYLOOP_CC at a C compiler") from None
    if result.returncode != 0:
        raise BuildError(f"C compilation failed (exit status {result.returncode}) for "
                         f"{source_path}\ncommand: {' '.join(command)}\n"
                         f"{_trim(result.stderr or result.stdout)}")


def _cache_key(source: str, flags: tuple[str, ...], version: str) -> str:
    h = hashlib.sha256()
    for part in (version, *flags, source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cached source is meant to be read
    os.replace(tmp, path)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "kernel"


def _trim(message: str) -> str:
    lines = message.strip().splitlines()
    kept = lines[:_MAX_ERROR_LINES]
    text = "\n".join(kept)
    if len(text) > _MAX_ERROR_CHARS:
        text = text[:_MAX_ERROR_CHARS] + " ..."
    if len(lines) > len(kept):
        text += f"\n... ({len(lines) - len(kept)} more lines)"
    return text
