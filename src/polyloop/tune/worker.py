# SPDX-License-Identifier: Apache-2.0
"""The tuning worker process: ``python -m polyloop.tune.worker FD``.

Started by ``workers.WorkerProcess`` with one end of a socket pair as file descriptor ``FD``.
It receives ``sys.path``, then the settings and the registered tensor intrinsics, then serves
requests until told to stop (or the connection closes):

- ``("build", BuildJob)`` -> ``("started",)``, then a ``BuildResult`` (replay the trace,
  compile);
- ``("inputs", inputs, sizes)`` -> ``("ok",)`` (kept for the runs that follow);
- ``("run", kernel_spec, repeat)`` -> ``RunResult`` (one checked call, then timings).
"""
from __future__ import annotations

import pickle
import sys
from multiprocessing.connection import Connection

from .. import config
from ..schedule.intrin_registry import register_intrinsic
from .measure import build_one, run_one


def serve(conn: Connection) -> None:
    """Answer requests on ``conn`` until ``("stop",)`` or the connection closes."""
    inputs: dict = {}
    sizes: dict = {}
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message[0] == "build":
            conn.send(("started",))     # the build's time-out counts from here
            conn.send(build_one(message[1]))
        elif message[0] == "inputs":
            inputs, sizes = message[1], message[2]
            conn.send(("ok",))
        elif message[0] == "run":
            conn.send(run_one(message[1], inputs, sizes, message[2]))
        else:
            return


def main(argv: list[str]) -> None:
    conn = Connection(int(argv[0]))
    _, path = conn.recv()
    # the tuner's module search path first: a program's classes unpickle as they imported there
    sys.path[:] = list(dict.fromkeys([*path, *sys.path]))
    _, settings, intrinsics = conn.recv()
    config.CONFIG = settings
    for blob in intrinsics:
        try:
            register_intrinsic(pickle.loads(blob))
        except Exception as e:  # noqa: BLE001 - one intrinsic that does not load is reported
            print(f"polyloop tuning worker: a tensor intrinsic did not load here: "
                  f"{type(e).__name__}: {e}", file=sys.stderr)
    serve(conn)


if __name__ == "__main__":
    main(sys.argv[1:])
