# SPDX-License-Identifier: Apache-2.0
"""The exceptions polyloop raises for user mistakes and refused transformations."""


class PolyloopError(Exception):
    """Base class of every error polyloop raises on purpose."""


class ScheduleError(PolyloopError):
    """A schedule primitive was refused: it would break a dependence or its handles are wrong."""


class ParseError(PolyloopError):
    """Text (an ISL set, an instruction, a script) could not be parsed; the message points at it."""


class BuildError(PolyloopError):
    """Code generation or compilation failed; the message carries the compiler's output."""


class ArgumentError(PolyloopError):
    """A module was called with a wrong argument (shape, dtype, rank, layout, missing)."""


class DTypeError(PolyloopError):
    """Operands of different dtypes were mixed without an explicit cast."""


class IndexOutOfBounds(ArgumentError, IndexError):
    """A kernel met an index read from data (or a non-affine index) outside its array; the
    access was skipped and the message names the buffer, the index and the statement."""
