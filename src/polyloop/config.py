# SPDX-License-Identifier: Apache-2.0
"""Settings. The only module that reads environment variables."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Config:
    cache_dir: Path
    cc: str
    dump: frozenset[str]
    num_threads: int | None
    fuzz_examples: int | None = None    # POLYLOOP_FUZZ_EXAMPLES: examples per fuzz test
    cflags: tuple[str, ...] = ()        # POLYLOOP_CFLAGS: appended to the C compiler's flags


def _positive_int(variable: str) -> int | None:
    """The variable's value as a positive integer; unset or invalid (with a warning) is None."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return None
    if text.isdigit() and int(text) > 0:
        return int(text)
    warnings.warn(f"{variable}={text!r} is not a positive integer; it is ignored",
                  RuntimeWarning, stacklevel=2)
    return None


def load() -> Config:
    cache = os.environ.get("POLYLOOP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "polyloop")
    dump = os.environ.get("POLYLOOP_DUMP", "")
    threads = _positive_int("POLYLOOP_NUM_THREADS")
    return Config(
        cache_dir=Path(cache),
        cc=os.environ.get("POLYLOOP_CC", "gcc"),
        dump=frozenset(s.strip() for s in dump.split(",") if s.strip()),
        num_threads=threads,
        fuzz_examples=_positive_int("POLYLOOP_FUZZ_EXAMPLES"),
        cflags=tuple(os.environ.get("POLYLOOP_CFLAGS", "").split()),
    )


CONFIG = load()

