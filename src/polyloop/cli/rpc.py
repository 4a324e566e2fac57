# SPDX-License-Identifier: Apache-2.0
"""``polyloop rpc``: the RPC server, the tracker, the C server for a device, and a tracker's
device list (docs/rpc.md).

>>> from polyloop.cli import main
>>> main(["rpc", "server", "--port", "9090"])   # doctest: +SKIP
"""
from __future__ import annotations

import argparse
import time

from .. import rpc
from ..errors import PolyloopError
from ..rpc.client import read_key_file
from ..rpc.protocol import DEFAULT_PORT, DEFAULT_TRACKER_PORT, as_key
from ..rpc.tracker import TrackerClient


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _key(args: argparse.Namespace) -> bytes | None:
    if args.key and args.key_file:
        raise PolyloopError("give --key or --key-file, not both")
    return read_key_file(args.key_file) if args.key_file else as_key(args.key)


def _add_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", default=None, help="the shared key (default: POLYLOOP_RPC_KEY); "
                                               "needed when listening off loopback")
    p.add_argument("--key-file", default=None, metavar="FILE",
                   help="read the key from FILE (not visible in the process list)")


def cmd_server(args: argparse.Namespace) -> int:
    limits = rpc.Limits(max_upload=args.max_upload, max_frame=args.max_frame,
                        max_memory=args.max_memory, session_timeout=args.session_timeout,
                        call_seconds=args.call_timeout)
    options = rpc.ServerOptions(args.host, args.port, _key(args), args.work_dir, args.target,
                                args.max_sessions, limits, args.tracker, args.device_key,
                                args.advertise)
    rpc.serve(options)
    return 0


def cmd_tracker(args: argparse.Namespace) -> int:
    tracker = rpc.Tracker(rpc.TrackerOptions(args.host, args.port, _key(args)))
    host, port = tracker.start()
    print(f"polyloop rpc tracker listening on {host}:{port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        tracker.close()
    return 0


def cmd_build_server(args: argparse.Namespace) -> int:
    path = rpc.build_server(args.target, args.output,
                            extra_flags=("-static",) if args.static else ())
    print(f"{path}: the polyloop RPC server for '{args.target}'; copy it to the device and "
          f"run it there: ./{path.name} --port {DEFAULT_PORT}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    client = TrackerClient(*args.tracker, key=_key(args))
    try:
        devices = client.status()
    finally:
        client.close()
    if not devices:
        print("no device registered")
    for d in devices:
        print(f"{d['device_key']:<16} {d['host']}:{d['port']:<6} {d['target']:<40} "
              f"{'busy' if d['busy'] else 'free'}")
    return 0


def add_rpc_commands(commands) -> None:
    """``polyloop rpc server|tracker|build-server|status``."""
    top = commands.add_parser("rpc", help="run kernels and models on devices: RPC server, "
                                          "tracker, the C server for a device")
    sub = top.add_subparsers(dest="rpc_command", metavar="RPC_COMMAND", required=True)
    server = sub.add_parser("server", help="serve kernels on this machine (needs Python)")
    server.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; others need a key)")
    server.add_argument("--port", type=int, default=DEFAULT_PORT)
    _add_key(server)
    server.add_argument("--work-dir", default=None, help="where sessions write their libraries "
                                                         "(default: a fresh temporary one)")
    server.add_argument("--target", default=None,
                        help="the target hosts build for (default: this machine's triple)")
    server.add_argument("--max-sessions", type=int, default=4)
    server.add_argument("--max-upload", type=int, default=64 << 20, metavar="BYTES")
    server.add_argument("--max-frame", type=int, default=256 << 20, metavar="BYTES")
    server.add_argument("--max-memory", type=int, default=1 << 30, metavar="BYTES")
    server.add_argument("--session-timeout", type=float, default=300.0, metavar="SECONDS")
    server.add_argument("--call-timeout", type=int, default=600, metavar="SECONDS")
    server.add_argument("--tracker", type=_address, default=None, metavar="HOST:PORT",
                        help="register with this tracker")
    server.add_argument("--device-key", default=None, help="the pool to register in")
    server.add_argument("--advertise", default=None, metavar="HOST",
                        help="the address the tracker hands out for this server")
    server.set_defaults(run=cmd_server)
    tracker = sub.add_parser("tracker", help="share devices between tuning jobs")
    tracker.add_argument("--host", default="127.0.0.1")
    tracker.add_argument("--port", type=int, default=DEFAULT_TRACKER_PORT)
    _add_key(tracker)
    tracker.set_defaults(run=cmd_tracker)
    build = sub.add_parser("build-server", help="cross-compile the C RPC server for a device")
    build.add_argument("--target", required=True,
                       help="e.g. aarch64-linux-gnu, or 'c -mtriple=aarch64-linux-gnu "
                            "-mcpu=cortex-a76'")
    build.add_argument("-o", "--output", required=True)
    build.add_argument("--static", action="store_true", help="link the C library statically")
    build.set_defaults(run=cmd_build_server)
    status = sub.add_parser("status", help="list the devices registered with a tracker")
    status.add_argument("--tracker", type=_address, required=True, metavar="HOST:PORT")
    _add_key(status)
    status.set_defaults(run=cmd_status)
