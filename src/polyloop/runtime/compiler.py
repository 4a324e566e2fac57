# SPDX-License-Identifier: Apache-2.0
"""Compile C source into a shared library, cached on disk by content.

The cache key is the SHA-256 of the source, the flags and the compiler's version line, so a
source compiled once is never compiled again, by this process or any other. Each entry is a
directory holding ``kernel.c`` and ``kernel.so``; both are written to a temporary file in the
same directory and renamed into place, so concurrent processes never see a partial file.
"""
from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import config
from ..errors import BuildError
from ..util.process import Completed, ProcessTimeout, run_limited
from . import cache
from .target import HOST, Target, install_hint

# -fwrapv: signed integer overflow wraps around, as in NumPy (C leaves it undefined, and gcc
# then folds comparisons like ``a + 1 > a`` to true).
BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11", "-fwrapv")
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


def target_flags(target: Target = HOST) -> tuple[str, ...]:
    """``BASE_FLAGS`` with ``target``'s architecture flags in place of ``-march=native``.

    >>> target_flags(Target("aarch64-linux-gnu"))[:2]
    ('-O3', '-march=armv8-a')
    """
    if target.runs_here:
        return BASE_FLAGS
    arch = target.arch_flags
    return tuple(f for flag in BASE_FLAGS for f in (arch if flag == "-march=native" else (flag,)))


def compile_c(source: str, *, name: str, fast_math: bool = False,
              extra_flags: tuple[str, ...] = (), target: Target = HOST) -> Library:
    """Compile C ``source`` into a shared library, or reuse the cached one.

    The compiler is ``config.CONFIG.cc`` (``POLYLOOP_CC``, default ``gcc``), stopped after
    ``config.CONFIG.compile_timeout`` seconds (``POLYLOOP_COMPILE_TIMEOUT``); the cache lives
    under ``config.CONFIG.cache_dir`` (``POLYLOOP_CACHE_DIR``, see ``cache.py`` for its safety
    rules). ``name`` labels the cache entry. ``target``: the machine the library is for (its
    compiler and architecture flags, see ``target.py``; part of the cache key). Raises
    BuildError with the compiler's message and the source path on failure.

    >>> lib = compile_c("int answer(void) { return 42; }", name="answer")
    >>> lib.path.name
    'kernel.so'
    """
    cc = target.cc
    flags = target_flags(target) + (("-ffast-math",) if fast_math else ()) + tuple(extra_flags) \
        + _cflags(target)
    key = _cache_key(source, flags + LINK_FLAGS + LINK_ONLY_FLAGS, compiler_version(cc))
    entry = cache.safe_directory(config.CONFIG.cache_dir) / f"{_safe(name)}-{key[:24]}"
    source_path, library_path = entry / SOURCE_NAME, entry / LIBRARY_NAME
    with cache.locked(entry):
        try:
            if not _source_matches(source_path, source):
                cache.write_atomic(source_path, source.encode(), 0o600)
            if cache.verified(library_path):
                STATS.cache_hits += 1
                return Library(library_path, source_path, True, flags)
            _run_compiler(cc, flags, source_path, library_path)
        except OSError as e:   # a full disk, a read-only cache
            raise _cache_error(entry, e) from None
    return Library(library_path, source_path, False, flags)


def _source_matches(path: Path, source: str) -> bool:
    try:
        return path.read_bytes() == source.encode()
    except OSError:
        return False


def vectorizes_negative_step_reductions_wrongly(cc: str) -> bool:
    """GCC 12.1 and 12.2 can vectorize a reduction reading memory backwards wrongly at -O3
    (fixed in 12.3); polyloop compiles such kernels without loop vectorization there."""
    version = compiler_version(cc)
    return "gcc" in version.lower() and re.search(r"\b12\.[12]\.\d+", version) is not None


def _cflags(target: Target) -> tuple[str, ...]:
    """POLYLOOP_CFLAGS (e.g. -fsanitize=address,undefined): for this machine's compiler only;
    a cross compiler may not have the libraries they need."""
    return config.CONFIG.cflags if target.runs_here else ()


def workaround_flags(*, negative_step_reduction: bool, target: Target = HOST) -> tuple[str, ...]:
    """Flags that keep the C compiler's known wrong-code bugs away from a kernel: GCC 12.1 and
    12.2 vectorize a reduction reading memory backwards wrongly (fixed in 12.3).
    ``negative_step_reduction``: whether the kernel has such a reduction
    (``lower.hazards.negative_stride_reduction``).

    >>> workaround_flags(negative_step_reduction=False)
    ()
    """
    if negative_step_reduction and vectorizes_negative_step_reductions_wrongly(target.cc):
        return ("-fno-tree-loop-vectorize",)
    return ()


def compiler_version(cc: str) -> str:
    """The first line of ``cc --version``, computed once per process and compiler."""
    if cc not in _VERSIONS:
        out = _run(cc, [cc, "--version"], None)
        lines = out.stdout.strip().splitlines()
        _VERSIONS[cc] = lines[0] if lines else cc
    return _VERSIONS[cc]


def _run_compiler(cc: str, flags: tuple[str, ...], source_path: Path, library_path: Path) -> None:
    """Compile and link ``source_path`` into ``library_path`` (installed with its hash).

    With ``-ffast-math``, gcc links ``crtfastmath.o`` into the library, whose constructor turns
    on flush-to-zero for the whole process as soon as the library is loaded (NumPy then rounds
    subnormals to 0). Such sources are therefore compiled to an object with the flags and linked
    in a second step without them. The caller holds the entry's lock."""
    entry = library_path.parent
    tmp = cache.temp_path(entry, ".so")
    STATS.compiles += 1
    try:
        if "-ffast-math" in flags:
            obj = cache.temp_path(entry, ".o")
            try:
                _compile(cc, [cc, *(f for f in flags if f != "-shared"), "-c", "-o", str(obj),
                              str(source_path)], source_path)
                _compile(cc, [cc, *LINK_ONLY_FLAGS, "-o", str(tmp), str(obj), *LINK_FLAGS],
                         source_path)
            finally:
                obj.unlink(missing_ok=True)
        else:
            _compile(cc, [cc, *flags, "-o", str(tmp), str(source_path), *LINK_FLAGS],
                     source_path)
        if tmp.stat().st_size == 0:
            raise BuildError(f"the C compiler '{cc}' reported success but wrote no library for "
                             f"{source_path}; check POLYLOOP_CC")
        cache.install(tmp, library_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _run(cc: str, command: list[str], source_path: Path | None) -> Completed:
    timeout = config.CONFIG.compile_timeout
    try:
        return run_limited(command, timeout=timeout)
    except OSError as e:
        raise BuildError(f"cannot run the C compiler '{cc}': {e.strerror}; "
                         f"{install_hint(cc)}") from None
    except ProcessTimeout:
        what = f"compiling {source_path}" if source_path is not None else f"{cc} --version"
        raise BuildError(f"the C compiler '{cc}' did not finish within {timeout:g} s "
                         f"({what}) and was stopped; raise POLYLOOP_COMPILE_TIMEOUT for a "
                         "very large kernel, or check POLYLOOP_CC") from None


def _compile(cc: str, command: list[str], source_path: Path) -> None:
    result = _run(cc, command, source_path)
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


def compile_c_units(units: list[tuple[str, tuple[str, ...]]], *, name: str,
                    jobs: int = 2, target: Target = HOST) -> Library:
    """Compile several C translation units (``(source, extra_flags)`` each) into ONE shared
    library, cached on disk by all their contents. Each unit keeps its own static helpers and
    is compiled to an object cached by its own content (a model rebuilt with other weights
    recompiles only what changed); the units are compiled ``jobs`` at a time, then linked.
    Units compiled ahead with ``compile_unit`` are found in that cache. ``target``: as in
    ``compile_c``.

    >>> lib = compile_c_units([("int one(void) { return 1; }", ()),
    ...                        ("int two(void) { return 2; }", ())], name="pair")
    >>> lib.path.name
    'kernel.so'
    """
    cc = target.cc
    version = compiler_version(cc)
    object_flags = _object_flags(target)
    keys = [_cache_key(source, object_flags + tuple(extra), version) for source, extra in units]
    link_key = _cache_key(" ".join(keys), LINK_ONLY_FLAGS + LINK_FLAGS, version)
    root = cache.safe_directory(config.CONFIG.cache_dir)
    entry = root / f"{_safe(name)}-{link_key[:24]}"
    library_path = entry / LIBRARY_NAME
    objects = [_object_path(root, key) for key in keys]
    first_source = objects[0].with_name("unit.c")
    try:
        (root / "objects").mkdir(mode=0o700, exist_ok=True)
        with cache.locked(entry):
            if cache.verified(library_path):
                STATS.cache_hits += 1
                return Library(library_path, first_source, True, target_flags(target))
            todo = [(cc, [*object_flags, *extra], source, obj)
                    for (source, extra), obj in zip(units, objects)]
            STATS.compiles += 1
            with ThreadPoolExecutor(max(1, jobs)) as pool:
                list(pool.map(lambda job: _compile_object(*job), todo))
            tmp = cache.temp_path(entry, ".so")
            try:
                _compile(cc, [cc, *LINK_ONLY_FLAGS, "-o", str(tmp), *map(str, objects),
                              *LINK_FLAGS], first_source)
                cache.install(tmp, library_path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
    except OSError as e:   # a full disk, a read-only cache
        raise _cache_error(entry, e) from None
    return Library(library_path, first_source, False, target_flags(target))


def compile_unit(source: str, extra: tuple[str, ...] = (), target: Target = HOST) -> None:
    """Compile one C unit to the object ``compile_c_units`` will link, now: a caller that
    generates many units starts each one's compilation while it generates the next (gcc runs
    in its own process, so a thread pool overlaps the two).

    >>> compile_unit("int three(void) { return 3; }")
    >>> compile_c_units([("int three(void) { return 3; }", ())], name="three").path.name
    'kernel.so'
    """
    cc = target.cc
    key = _cache_key(source, _object_flags(target) + tuple(extra), compiler_version(cc))
    root = cache.safe_directory(config.CONFIG.cache_dir)
    obj = _object_path(root, key)
    try:
        (root / "objects").mkdir(mode=0o700, exist_ok=True)
        _compile_object(cc, [*_object_flags(target), *extra], source, obj)
    except OSError as e:
        raise _cache_error(obj.parent, e) from None


def _object_flags(target: Target) -> tuple[str, ...]:
    """The flags that compile one unit to an object (no ``-shared``)."""
    return tuple(f for f in target_flags(target) if f != "-shared")


def _object_path(root: Path, key: str) -> Path:
    return root / "objects" / key[:32] / "unit.o"


def _cache_error(entry: Path, e: OSError) -> BuildError:
    return BuildError(f"cannot write the kernel cache entry {entry}: {e.strerror}; point "
                      "POLYLOOP_CACHE_DIR at a writable directory")


def _compile_object(cc: str, flags: list[str], source: str, obj: Path) -> None:
    """Compile one unit to ``obj``, or keep the verified object already there (each object
    is a cache entry of its own, with its lock and hash)."""
    with cache.locked(obj.parent):
        if cache.verified(obj):
            return
        source_path = obj.with_name("unit.c")
        cache.write_atomic(source_path, source.encode(), 0o600)
        tmp = cache.temp_path(obj.parent, ".o")
        try:
            _compile(cc, [cc, *flags, "-c", "-o", str(tmp), str(source_path)], source_path)
            cache.install(tmp, obj)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
