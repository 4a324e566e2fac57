# SPDX-License-Identifier: Apache-2.0
"""CrossModule: a kernel compiled for another machine (``pl.build(..., target="c
-mtriple=aarch64-linux-gnu")``).

It has everything a module has except a way to run here: the source, the library, the
signature, the argument checks (``bind``: the shapes and dtypes of a call are checked on this
machine before anything is sent to a device) and ``export_library``. Calling it raises a
PolyloopError that says how to run it on its device (``polyloop.rpc``).
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path

from ..errors import PolyloopError
from .compiler import Library
from .kernel import CompiledKernel
from .target import Target


class CrossModule(CompiledKernel):
    """A compiled kernel for ``target``'s machine; see the module docstring.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A")
    >>> B = pl.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> mod = pl.build(B, target="c -mtriple=aarch64-linux-gnu")   # doctest: +SKIP
    >>> mod.export_library("build/libB.so")                         # doctest: +SKIP
    """

    def __init__(self, library: Library, *, target: Target, **interface: object) -> None:
        super().__init__(library, target=str(target), **interface)  # type: ignore[arg-type]
        self.target_object = target
        self.schedule = None                     # set by the driver

    def __call__(self, *positional: object, **named: object) -> object:
        raise self._elsewhere("called")

    def benchmark(self, *positional: object, **named: object) -> float:
        """Refused: the module runs on its device (see ``polyloop.rpc``)."""
        raise self._elsewhere("timed")

    def export_library(self, path: str | PathLike) -> tuple[Path, Path]:
        """Copy the shared library to ``path`` and write a C header next to it (as
        ``Module.export_library``); copy both to the device and link or ``dlopen`` it there.

        >>> so, h = mod.export_library("build/libmatmul.so")  # doctest: +SKIP
        """
        return self._export(path, checks_sizes=bool(self.params))

    def _elsewhere(self, what: str) -> PolyloopError:
        return PolyloopError(
            f"module '{self.entry}' was built for '{self.target}' and cannot be {what} on this "
            "machine; run it on the device over RPC: remote = pl.rpc.connect(host, port), "
            "f = remote.load_module(remote.upload(mod)), then f(...) or f.benchmark(...) "
            "(or export it with mod.export_library(path))")
