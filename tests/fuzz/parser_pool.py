# SPDX-License-Identifier: Apache-2.0
"""Run fuzzed parser inputs in a separate process, one at a time, with a time limit.

The process reads an input (what kind of text, the text), runs polyloop's public entry point
on it and answers with what happened: accepted, a ``PolyloopError``, or a foreign exception
with its traceback. A process that dies (a crash inside isl or Python) or does not answer in
time (a hang) is replaced, and the input is reported as such: the caller fails the test.
"""
from __future__ import annotations

import multiprocessing as mp
import traceback
from dataclasses import dataclass

import polyloop as pl  # pl.script(text) reads names (pl.Buffer) from the caller's module

TIMEOUT_S = 20.0        # generous: a loaded CI machine; a hang is minutes


@dataclass(frozen=True)
class Outcome:
    verdict: str        # "accepted", "refused" (a PolyloopError), "foreign", "crash", "hang"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict in ("accepted", "refused")


def run_input(kind: str, text: str, extra: str) -> None:
    """What the worker does with one input (raises whatever polyloop raises)."""
    if kind == "domain":
        knl = pl.make_kernel(text, extra)
        str(knl)
    elif kind == "instructions":
        knl = pl.make_kernel(extra, text)
        str(knl)
    elif kind == "script":
        prog = pl.script(text)
        str(pl.Schedule(prog))
    elif kind == "trace":
        pl.Schedule.from_trace(pl.script(extra), text)
    else:
        raise ValueError(f"unknown input kind {kind!r}")


def _serve(conn) -> None:
    import warnings
    warnings.simplefilter("ignore")     # Python's SyntaxWarnings about mutated sources
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        try:
            run_input(*job)
            answer = Outcome("accepted")
        except pl.PolyloopError as e:
            answer = Outcome("refused", f"{type(e).__name__}: {str(e)[:300]}")
        except BaseException as e:  # noqa: BLE001 - reporting it is the point
            answer = Outcome("foreign", f"{type(e).__name__}: {str(e)[:300]}\n"
                             + "".join(traceback.format_exc(limit=-6)))
        conn.send(answer)


class ParserPool:
    """One worker process; ``run`` restarts it after a crash or a hang."""

    def __init__(self, timeout_s: float = TIMEOUT_S):
        self.timeout_s = timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self.counts: dict[str, int] = {}

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child,), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
        self._proc = self._conn = None

    def run(self, kind: str, text: str, extra: str = "") -> Outcome:
        if self._proc is None:
            self._start()
        assert self._conn is not None and self._proc is not None
        self._conn.send((kind, text, extra))
        if not self._conn.poll(self.timeout_s):
            self._stop()
            out = Outcome("hang", f"no answer within {self.timeout_s} s")
        else:
            try:
                out = self._conn.recv()
            except (EOFError, ConnectionError):
                code = self._proc.exitcode
                self._stop()
                out = Outcome("crash", f"the worker died (exit code {code})")
        self.counts[out.verdict] = self.counts.get(out.verdict, 0) + 1
        return out

    def close(self) -> None:
        self._stop()
