# SPDX-License-Identifier: Apache-2.0
"""What every compiled C kernel has, whether it runs here (``Module``) or on another machine
(``CrossModule``): the library and its source, the signature, the argument checks of a call,
what code generation said about it, and the exported library with its header."""
from __future__ import annotations

from os import PathLike
from pathlib import Path

from ..ir.assumption import Assumption
from ..ir.program import Buffer, BufferRole
from ..util.highlight import to_html
from .binding import Binder, shape_to_str
from .compiler import Library
from .header import export_files, header_lines
from .size_inference import Plan


class CompiledKernel:
    """The part of a compiled kernel that needs no loading (see the module docstring)."""

    def __init__(self, library: Library, *, entry: str, args: tuple[Buffer, ...],
                 params: tuple[str, ...], source: str, target: str,
                 assumptions: tuple[Assumption, ...] = (), temps: tuple[Buffer, ...] = (),
                 index_sites: tuple[str, ...] = (),
                 partial_outputs: frozenset[str] = frozenset()) -> None:
        self.library = library
        self.entry = entry
        self.args = tuple(args)
        self.params = tuple(params)
        self.source = source
        self.target = target
        self.signature = signature_to_str(entry, self.args)
        self._binder = Binder(entry, self.args, self.params, assumptions=assumptions,
                              temps=temps, zeroed=partial_outputs)
        self._index_sites = tuple(index_sites)   # accesses checked at run time, by site number
        self.explanation: tuple[str, ...] = ()   # set by the driver (``explain()``)

    def explain(self) -> str:
        """What code generation made of the schedule, one fact a line (see ``pl.build``'s
        ``explain``); empty when there is nothing to say.

        >>> print(mod.explain())  # doctest: +SKIP
        loop 'j_1': explicit vectors of 16 lanes (avx512), remainder none
        """
        return "\n".join(self.explanation)

    @property
    def requires(self) -> tuple[str, ...]:
        """The conditions on the size parameters every call checks, beyond each size being
        >= 0: the program's assumptions, then what polyloop derived (sizes at which an access
        would leave its buffer are excluded). The generated C checks them too.

        >>> import polyloop as pl
        >>> @pl.script
        ... def last(A: pl.Buffer[("n",), "float64"], B: pl.Buffer[("n",), "float64"]):
        ...     for i in range(n):
        ...         B[i] = A[n - 1]
        ...     B[0] = 0.0
        >>> pl.build(last).requires
        ('n >= 1',)
        """
        return self._binder.requires

    @property
    def index_sites(self) -> tuple[str, ...]:
        """The accesses the kernel checks at run time, by site number (``index_checks``)."""
        return self._index_sites

    def bind(self, positional: tuple, named: dict) -> tuple[list, Plan]:
        """Check a call's arguments without calling: the arrays in signature order (outputs
        not passed allocated) and the plan (sizes, allocations). An RPC client checks this
        way before it sends anything to a device."""
        arrays, _, plan = self._binder.bind(positional, named)
        return arrays, plan

    @property
    def cache_hit(self) -> bool:
        """Whether the library came from the on-disk cache rather than a fresh compilation."""
        return self.library.cache_hit

    def _export(self, path: str | PathLike, *, checks_sizes: bool) -> tuple[Path, Path]:
        lines = header_lines(self.entry, self.args, self.params, self.signature,
                             self._binder.assumptions, checks_sizes=checks_sizes)
        return export_files(self.library.path, path, self.entry, "\n".join(lines) + "\n")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.signature} target={self.target!r} "
                f"library={self.library.path}>")

    def _repr_html_(self) -> str:
        """The generated source, highlighted (Jupyter displays a module this way)."""
        return to_html(self.source, "c")


def returned(arrays: list, plan: Plan) -> object:
    """What a call returns: the outputs it allocated (one array, a tuple, or None)."""
    allocations = plan.allocations
    if not allocations:
        return None
    if len(allocations) == 1:
        return arrays[allocations[0][0]]
    return tuple(arrays[i] for i, _ in allocations)


def signature_to_str(entry: str, args: tuple[Buffer, ...]) -> str:
    """``f(A: float32[n, n], B: float32[n, n]) -> C: float32[n, n]``; inouts are marked."""
    def one(b: Buffer) -> str:
        inout = "inout " if b.role is BufferRole.INOUT else ""
        return f"{b.name}: {inout}{shape_to_str(b)}"
    inputs = [one(b) for b in args if b.role is not BufferRole.OUTPUT]
    outputs = [one(b) for b in args if b.role is BufferRole.OUTPUT]
    result = outputs[0] if len(outputs) == 1 else f"({', '.join(outputs)})" if outputs else "None"
    return f"{entry}({', '.join(inputs)}) -> {result}"
