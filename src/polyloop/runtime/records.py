# SPDX-License-Identifier: Apache-2.0
"""The tuning records: an SQLite file of measured schedules, one row per candidate.

A workload is keyed by a hash of its program's canonical text and the target; a record holds
the schedule's trace (JSON), its run times, its error if it failed, the machine it ran on and
when. ``pl.tune`` writes records; ``pl.build(..., database=path)`` reads the best one. The file
uses SQLite's write-ahead log, so several processes may write at once.

>>> import tempfile, polyloop as pl
>>> from polyloop.runtime.records import Database, Record, workload_key
>>> A = pl.placeholder((4,), name="A"); B = pl.compute((4,), lambda i: A[i], name="B")
>>> key = workload_key(pl.to_program(B), "c")
>>> db = Database(tempfile.mkdtemp())
>>> db.add(Record(key, "[]", (1e-3, 2e-3)))
>>> db.best(key).seconds
0.0015
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sqlite3
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..errors import PolyloopError
from ..ir.program import program_to_str
from ..ir.program import Program

FILE_NAME = "records.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workload TEXT NOT NULL,
    target TEXT NOT NULL,
    trace TEXT NOT NULL,
    status TEXT NOT NULL,
    seconds REAL,
    times TEXT NOT NULL,
    error TEXT NOT NULL,
    machine TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS records_workload ON records (workload, status, seconds);
"""


class Status(Enum):
    """How a candidate's measurement ended."""
    OK = "ok"
    INVALID = "invalid"          # the space drew a schedule the primitives refused
    BUILD_ERROR = "build_error"
    RUN_ERROR = "run_error"      # the candidate crashed its worker
    TIMEOUT = "timeout"
    MISMATCH = "mismatch"        # results differ from the default schedule's: a polyloop bug


def workload_key(program: Program, target: str) -> str:
    """A hash of the program's canonical text and the target (the same computation written
    again gets the same key)."""
    text = program_to_str(program) + "\n#target " + target
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def machine() -> str:
    """A short description of this machine: processor, cores, system."""
    return f"{platform.machine()} {platform.processor() or '?'} {os.cpu_count()} cores " \
           f"{platform.system()} {platform.release()}"


@dataclass(frozen=True, slots=True)
class Record:
    """One measured (or failed) candidate of a workload."""
    workload: str
    trace: str
    times: tuple[float, ...] = ()
    status: Status = Status.OK
    error: str = ""
    target: str = "c"
    machine: str = field(default_factory=machine)
    created: float = field(default_factory=time.time)

    @property
    def seconds(self) -> float | None:
        """The median run time (None for a failed candidate)."""
        if self.status is not Status.OK or not self.times:
            return None
        return statistics.median(self.times)


class Database:
    """The records under ``path`` (a directory holding ``records.sqlite``, or the file)."""

    def __init__(self, path: str | os.PathLike):
        p = Path(path)
        if p.suffix not in (".sqlite", ".db"):
            p.mkdir(parents=True, exist_ok=True)
            p = p / FILE_NAME
        elif not p.parent.is_dir():
            raise PolyloopError(f"database {p}: its directory does not exist; create it or "
                                "give a work directory")
        self.path = p
        with self._connect() as con:
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction (committed, then closed)."""
        con = sqlite3.connect(self.path, timeout=30.0)
        try:
            with con:
                yield con
        finally:
            con.close()

    def add(self, record: Record) -> None:
        """Store a record (safe with other writers)."""
        with self._connect() as con:
            con.execute("INSERT INTO records (workload, target, trace, status, seconds, times, "
                        "error, machine, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (record.workload, record.target, record.trace, record.status.value,
                         record.seconds, json.dumps(list(record.times)), record.error,
                         record.machine, record.created))

    def records(self, workload: str) -> list[Record]:
        """Every record of a workload, oldest first."""
        with self._connect() as con:
            rows = con.execute("SELECT workload, trace, times, status, error, target, machine, "
                               "created FROM records WHERE workload = ? ORDER BY id",
                               (workload,)).fetchall()
        return [_record(r) for r in rows]

    def best(self, workload: str) -> Record | None:
        """The fastest successful record of a workload (None if there is none)."""
        top = self.top(workload, 1)
        return top[0] if top else None

    def top(self, workload: str, k: int) -> list[Record]:
        """The ``k`` fastest successful records of a workload, fastest first."""
        with self._connect() as con:
            rows = con.execute("SELECT workload, trace, times, status, error, target, machine, "
                               "created FROM records WHERE workload = ? AND status = 'ok' "
                               "ORDER BY seconds LIMIT ?", (workload, k)).fetchall()
        return [_record(r) for r in rows]

    def workloads(self) -> list[str]:
        with self._connect() as con:
            return [r[0] for r in con.execute("SELECT DISTINCT workload FROM records")]


def _record(row: tuple) -> Record:
    workload, trace, times, status, error, target, mach, created = row
    return Record(workload, trace, tuple(json.loads(times)), Status(status), error, target,
                  mach, created)
