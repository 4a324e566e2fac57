# SPDX-License-Identifier: Apache-2.0
"""The exceptions polyloop raises for user mistakes and refused transformations."""
from __future__ import annotations

from dataclasses import dataclass


class PolyloopError(Exception):
    """Base class of every error polyloop raises on purpose."""


@dataclass(frozen=True, slots=True)
class BrokenDependence:
    """The dependence a refused schedule would break, as data (``ScheduleError.dependence``).

    ``kind`` is "RAW", "WAR" or "WAW"; ``distance`` the constant distance vector of a dependence
    of a statement on itself, when it has one; ``example`` one concrete broken instance pair,
    e.g. ``C(i=1, k=1) reads C[1] written by C(i=1, k=0) (with n=2)``.
    """
    kind: str
    source: str
    sink: str
    buffer: str
    distance: tuple[int, ...] | None
    reduction: bool
    example: str


class ScheduleError(PolyloopError):
    """A schedule primitive was refused: it would break a dependence or its handles are wrong.

    When a dependence is the reason, ``dependence`` holds it (a ``BrokenDependence``); for a
    wrong argument it is None.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), "float32", name="A")
    >>> k = pl.reduce_axis(8, name="k")
    >>> S = pl.compute((1,), lambda i: pl.sum(A[k], axis=k), name="S")
    >>> sch = pl.Schedule(S)
    >>> try:
    ...     sch.parallel(sch.get_loops("S")[1])
    ... except pl.ScheduleError as e:
    ...     print(e.dependence.kind, e.dependence.source, e.dependence.buffer)
    RAW S S
    """

    def __init__(self, message: str, *, dependence: BrokenDependence | None = None) -> None:
        super().__init__(message)
        self.dependence = dependence


class ParseError(PolyloopError):
    """Text (an ISL set, an instruction, a script) could not be parsed; the message points at it."""


class BuildError(PolyloopError):
    """Code generation or compilation failed; the message carries the compiler's output."""


class ArgumentError(PolyloopError):
    """A module was called with a wrong argument (shape, dtype, rank, layout, missing)."""


class DTypeError(PolyloopError):
    """Operands of different dtypes were mixed without an explicit cast."""


class DeviceError(PolyloopError):
    """No device can run the module (no CUDA GPU or driver here), or the device failed."""
