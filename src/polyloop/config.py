# SPDX-License-Identifier: Apache-2.0
"""Settings. The only module that reads environment variables."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Config:
    cache_dir: Path
    cc: str
    dump: frozenset[str]
    num_threads: int | None


def load() -> Config:
    cache = os.environ.get("POLYLOOP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "polyloop")
    dump = os.environ.get("POLYLOOP_DUMP", "")
    threads = os.environ.get("POLYLOOP_NUM_THREADS")
    return Config(
        cache_dir=Path(cache),
        cc=os.environ.get("POLYLOOP_CC", "gcc"),
        dump=frozenset(s.strip() for s in dump.split(",") if s.strip()),
        num_threads=int(threads) if threads else None,
    )


CONFIG = load()
