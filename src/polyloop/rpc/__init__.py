# SPDX-License-Identifier: Apache-2.0
"""L8 rpc: program a device from this machine. Build for its target (``pl.build(...,
target="c -mtriple=aarch64-linux-gnu")``), connect to the RPC server running there (a small C
program, ``polyloop rpc build-server``, or ``polyloop rpc server`` where Python is), upload the
library, call it on NumPy arrays and time it there; tune on devices shared through a tracker
(``pl.tune(..., runner=pl.rpc.Runner(tracker=(host, port), key="rk3588"))``). docs/rpc.md is
the guide and the protocol's reference.

>>> remote = pl.rpc.connect("127.0.0.1", 9090)                 # doctest: +SKIP
>>> mod = pl.build(sch, target=remote.target)                  # doctest: +SKIP
>>> f = remote.load_module(remote.upload(mod))                 # doctest: +SKIP
>>> c = f(a, b); seconds = f.benchmark(a, b)                   # doctest: +SKIP
"""
from .client import Remote, RemoteKernel, RemoteLibrary, RemoteModel, connect
from .device import build_server
from .protocol import RemoteError, SessionLost
from .runner import Runner
from .server import ServerOptions, serve
from .session import Limits
from .tracker import Tracker, TrackerOptions

__all__ = ["Limits", "Remote", "RemoteError", "RemoteKernel", "RemoteLibrary", "RemoteModel",
           "Runner", "ServerOptions", "SessionLost", "Tracker", "TrackerOptions", "build_server",
           "connect", "serve"]
