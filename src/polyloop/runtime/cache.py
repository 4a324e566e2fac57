# SPDX-License-Identifier: Apache-2.0
"""The on-disk cache of compiled kernels, and why nobody else can plant code in it.

A cached library is loaded into the Python process with ``dlopen``: whoever can write an entry
runs code as the user. So:

- the cache directory belongs to the user and nobody else can write it: it is created ``0700``,
  and an existing one owned by another user, or writable by its group or others, is refused;
- an entry is changed only under an exclusive ``fcntl`` lock on the entry, every file is
  written to a temporary name and renamed into place, and temporary files left by a build that
  was killed are removed by the next one;
- the SHA-256 of a library is recorded when it is written and checked before it is loaded: a
  truncated, corrupted or replaced library is rebuilt, never loaded.

>>> from pathlib import Path; import tempfile
>>> root = safe_directory(Path(tempfile.mkdtemp()) / "cache")
>>> oct(root.stat().st_mode & 0o777)
'0o700'
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ..errors import BuildError

LOCK_NAME = ".lock"
TEMP_PREFIX = ".tmp-"
HASH_SUFFIX = ".sha256"


def safe_directory(path: Path) -> Path:
    """``path`` as a directory only this user can write: created ``0700`` when missing,
    BuildError when another user owns it or its group or others may write it."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(path)
    except OSError as e:
        raise BuildError(f"cannot create the kernel cache directory {path}: {e.strerror}; "
                         "point POLYLOOP_CACHE_DIR at a writable directory") from None
    if not stat.S_ISDIR(info.st_mode):
        raise BuildError(f"the kernel cache {path} is not a directory; point "
                         "POLYLOOP_CACHE_DIR at a directory")
    if info.st_uid != os.getuid():
        raise BuildError(f"the kernel cache directory {path} belongs to another user (uid "
                         f"{info.st_uid}); a library in it would run with your rights. Point "
                         "POLYLOOP_CACHE_DIR at a directory of your own")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise BuildError(f"the kernel cache directory {path} is writable by other users (mode "
                         f"{stat.S_IMODE(info.st_mode):o}); anyone could plant a library in "
                         f"it. Make it private (chmod 700 {path}) or point POLYLOOP_CACHE_DIR "
                         "elsewhere")
    return path


@contextlib.contextmanager
def locked(entry: Path) -> Iterator[None]:
    """Hold the exclusive lock of cache entry ``entry`` (a directory, created if missing).
    Temporary files found under the lock were left by a writer that died: they are removed."""
    try:
        entry.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(entry / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        raise BuildError(f"cannot write the kernel cache entry {entry}: {e.strerror}; point "
                         "POLYLOOP_CACHE_DIR at a writable directory") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for stray in entry.glob(TEMP_PREFIX + "*"):
            with contextlib.suppress(OSError):
                stray.unlink()
        yield
    finally:
        os.close(fd)   # releases the lock


def temp_path(entry: Path, suffix: str) -> Path:
    """A fresh, empty temporary file in ``entry`` (removed by ``locked`` if left behind)."""
    fd, name = tempfile.mkstemp(dir=entry, prefix=TEMP_PREFIX, suffix=suffix)
    os.close(fd)
    return Path(name)


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: readers see the old
    file or the whole new one, never a part."""
    tmp = temp_path(path.parent, path.suffix)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def file_digest(path: Path) -> str | None:
    """SHA-256 of the file's bytes, or None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def install(tmp: Path, path: Path) -> None:
    """Move the finished file ``tmp`` to ``path`` and record its hash next to it; the hash is
    written last, so an entry interrupted in between is incomplete and gets rebuilt."""
    digest = file_digest(tmp)
    os.chmod(tmp, 0o700)
    os.replace(tmp, path)
    write_atomic(path.with_name(path.name + HASH_SUFFIX), (digest or "").encode())


def verified(path: Path) -> bool:
    """Whether ``path`` exists with the hash recorded when it was installed."""
    try:
        recorded = path.with_name(path.name + HASH_SUFFIX).read_text().strip()
    except OSError:
        return False
    return bool(recorded) and file_digest(path) == recorded
