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
from ..ir.assumption import Assumption
from ..ir.program import Buffer
from ..util.highlight import to_html
from .binding import Binder
from .compiler import Library
from .header import export_files, header_lines
from .module import signature_to_str
from .size_inference import Plan
from .target import Target


class CrossModule:
    """A compiled kernel for ``target``'s machine; see the module docstring.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), name="A")
    >>> B = pl.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> mod = pl.build(B, target="c -mtriple=aarch64-linux-gnu")   # doctest: +SKIP
    >>> mod.export_library("build/libB.so")                         # doctest: +SKIP
    """

    def __init__(self, library: Library, *, entry: str, args: tuple[Buffer, ...],
                 params: tuple[str, ...], source: str, target: Target,
                 assumptions: tuple[Assumption, ...] = (), temps: tuple[Buffer, ...] = (),
                 index_sites: tuple[str, ...] = (),
                 partial_outputs: frozenset[str] = frozenset()) -> None:
        self.library = library
        self.entry = entry
        self.args = tuple(args)
        self.params = tuple(params)
        self.source = source
        self.target = str(target)
        self.target_object = target
        self.signature = signature_to_str(entry, self.args)
        self.index_sites = tuple(index_sites)
        self.partial_outputs = partial_outputs
        self.binder = Binder(entry, self.args, self.params, assumptions=assumptions,
                             temps=temps, zeroed=partial_outputs)
        self.explanation: tuple[str, ...] = ()   # set by the driver (``explain()``)
        self.schedule = None                     # set by the driver

    def bind(self, positional: tuple, named: dict) -> tuple[list, Plan]:
        """Check a call's arguments as a module's call does; the arrays in signature order
        (outputs not passed allocated here) and the plan (sizes, allocations)."""
        arrays, _, plan = self.binder.bind(positional, named)
        return arrays, plan

    def __call__(self, *positional: object, **named: object) -> object:
        raise self._elsewhere("called")

    def benchmark(self, *positional: object, **named: object) -> float:
        """Refused: the module runs on its device (see ``polyloop.rpc``)."""
        raise self._elsewhere("timed")

    def explain(self) -> str:
        """What code generation made of the schedule (as ``Module.explain``)."""
        return "\n".join(self.explanation)

    def export_library(self, path: str | PathLike) -> tuple[Path, Path]:
        """Copy the shared library to ``path`` and write a C header next to it (as
        ``Module.export_library``); copy both to the device and link or ``dlopen`` it there.

        >>> so, h = mod.export_library("build/libmatmul.so")  # doctest: +SKIP
        """
        lines = header_lines(self.entry, self.args, self.params, self.signature,
                             self.binder.assumptions, checks_sizes=bool(self.params))
        return export_files(self.library.path, path, self.entry, "\n".join(lines) + "\n")

    def _elsewhere(self, what: str) -> PolyloopError:
        return PolyloopError(
            f"module '{self.entry}' was built for '{self.target}' and cannot be {what} on this "
            "machine; run it on the device over RPC: remote = pl.rpc.connect(host, port), "
            "f = remote.load_module(remote.upload(mod)), then f(...) or f.benchmark(...) "
            "(or export it with mod.export_library(path))")

    def __repr__(self) -> str:
        return f"<CrossModule {self.signature} target={self.target!r} library={self.library.path}>"

    def _repr_html_(self) -> str:
        return to_html(self.source, "c")
