# SPDX-License-Identifier: Apache-2.0
"""``polyloop rpc build-server``: cross-compile the C RPC server for a device.

The server is a few C files shipped with polyloop (``csrc/``), built by the target's cross
compiler into one program that needs only the C library (and ``libdl``) on the device. The
target it was built for is baked in: the server announces it, and hosts build for it.

>>> path = build_server("c -mtriple=aarch64-linux-gnu", "server-aarch64")   # doctest: +SKIP
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

from ..errors import BuildError
from ..runtime.compiler import compiler_version
from ..runtime.target import Target, install_hint
from ..util.process import ProcessTimeout, run_limited

SOURCES = ("pl_server.c", "pl_session.c", "pl_call.c", "pl_io.c", "pl_msgpack.c", "pl_sha256.c")
SOURCE_DIR = Path(__file__).resolve().parent / "csrc"
FLAGS = ("-O2", "-std=gnu11", "-Wall", "-Wextra")


def build_server(target: str | Target, output: str | PathLike, *,
                 extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile the C RPC server for ``target`` (a triple, a target string or a ``pl.Target``;
    ``"c"``: this machine) into the program ``output``; BuildError with the compiler's message.
    ``extra_flags``: more compiler flags (``("-static",)`` for a device without a shared
    C library; ``("-fsanitize=address,undefined",)`` to test the server itself)."""
    t = Target.parse(target) if isinstance(target, Target) or target.split()[:1] == ["c"] \
        else Target(target)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    arch = () if t.runs_here else t.arch_flags
    baked = f'-DPL_DEFAULT_TARGET="{t}"' if t.triple else None
    command = [t.cc, *FLAGS, *arch, *((baked,) if baked else ()), *extra_flags,
               *(str(SOURCE_DIR / name) for name in SOURCES), "-o", str(out), "-ldl"]
    try:
        compiler_version(t.cc)
        done = run_limited(command, timeout=300)
    except ProcessTimeout:
        raise BuildError(f"building the RPC server with {t.cc} took more than 300 s") from None
    except OSError as e:
        raise BuildError(f"cannot run {t.cc}: {e.strerror}; {install_hint(t.cc)}") from None
    if done.returncode != 0:
        raise BuildError(f"building the RPC server for '{t}' failed:\n"
                         f"command: {' '.join(command)}\n{(done.stderr or done.stdout)[-3000:]}")
    return out
