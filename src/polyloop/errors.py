# SPDX-License-Identifier: Apache-2.0
"""The exceptions polyloop raises for user mistakes and refused transformations, and the
boundary that keeps any other exception from escaping a public entry point that reads text.

Parsers report what they understand with a position (a caret under the text). Whatever they
do not foresee -- a ``RecursionError`` from an expression nested thousands of levels deep, an
``IndexError`` from a helper that met a case it was not written for -- is still the user's
input meeting a limit of polyloop, so ``foreign_errors`` turns it into a ``ParseError`` (or the
error class the entry point names) that says which entry point failed, quotes the start of the
text, and keeps the original exception for a bug report in ``error.internal``.

>>> @foreign_errors("demo")
... def parse(text):
...     return [int(x) for x in text.split(",")][3]
>>> try:
...     parse("1, 2")
... except PolyloopError as e:
...     print(type(e).__name__, "|", str(e).split(";")[0])
ParseError | demo: could not process this input (IndexError: list index out of range)
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, TypeVar


class PolyloopError(Exception):
    """Base class of every error polyloop raises on purpose.

    >>> import polyloop as pl
    >>> try:
    ...     pl.var("2n")
    ... except pl.PolyloopError as e:
    ...     print(type(e).__name__, e)
    PolyloopError size parameter name '2n' is not an identifier
    """


@dataclass(frozen=True, slots=True)
class BrokenDependence:
    """The dependence a refused schedule would break, as data (``ScheduleError.dependence``).

    ``kind`` is "RAW", "WAR" or "WAW"; ``distance`` the constant distance vector of a dependence
    of a statement on itself, when it has one; ``example`` one concrete broken instance pair,
    e.g. ``C(i=1, k=1) reads C[1] written by C(i=1, k=0) (with n=2)``.

    >>> import polyloop as pl
    >>> A = pl.placeholder((8,), "float32", name="A")
    >>> k = pl.reduce_axis(8, name="k")
    >>> S = pl.compute((1,), lambda i: pl.sum(A[k], axis=k), name="S")
    >>> sch = pl.Schedule(S)
    >>> try:
    ...     sch.parallel(sch.get_loops("S")[1])
    ... except pl.ScheduleError as e:
    ...     dep = e.dependence
    >>> dep.kind, dep.source, dep.sink, dep.buffer, dep.reduction
    ('RAW', 'S', 'S', 'S', True)
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
    """Text (an ISL set, an instruction, a script) could not be parsed; the message points at it.

    >>> import polyloop as pl
    >>> try:
    ...     pl.make_kernel("{ [i] : 0 <= i < }", "out[i] = 2*a[i]")
    ... except pl.ParseError as e:
    ...     print(str(e).splitlines()[0][:21])
    invalid loop domain (
    """


class BuildError(PolyloopError):
    """Code generation or compilation failed; the message carries the compiler's output.

    >>> import polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n and i mod 10000000000000000000 = 5 }",
    ...                      "out[i] = out[i] + 1.0", args=[pl.ArrayArg("out", "float64", ("n",))])
    >>> try:
    ...     pl.build(knl)
    ... except pl.BuildError as e:
    ...     print(str(e)[:63])
    loop 'i' of kernel 'loopy_kernel' steps by 10000000000000000000
    """


class ArgumentError(PolyloopError):
    """A module was called with a wrong argument (shape, dtype, rank, layout, missing).

    >>> import numpy as np, polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> mod = pl.build(pl.Schedule(pl.compute((4,), lambda i: A[i] * 2.0, name="B")))
    >>> try:
    ...     mod(np.ones(5, "float32"))
    ... except pl.ArgumentError as e:
    ...     print(e)
    argument 'A' of B_kernel() must have shape float32[4], got shape (5,):
    A.shape[0] must be 4, got 5
    """


class DTypeError(PolyloopError):
    """Operands of different dtypes were mixed without an explicit cast.

    >>> import polyloop as pl
    >>> A = pl.placeholder((4,), "float32", name="A")
    >>> I = pl.placeholder((4,), "int32", name="I")
    >>> try:
    ...     A[0] + I[0]
    ... except pl.DTypeError as e:
    ...     print(e)
    cannot mix float32 and int32 in '+'; cast one operand explicitly with .astype()
    >>> str(A[0] + I[0].astype("float32"))
    'A[0] + float32(I[0])'
    """


class IndexOutOfBounds(ArgumentError, IndexError):
    """A kernel met an index read from data (or a non-affine index) outside its array; the
    access was skipped and the message names the buffer, the index and the statement.

    >>> import numpy as np, polyloop as pl
    >>> knl = pl.make_kernel("{ [i] : 0 <= i < n }", "out[idx[i]] = a[i]  {id=scatter}",
    ...                      args=[pl.ArrayArg("out", "float32", shape=("m",)),
    ...                            pl.ArrayArg("idx", "int32", shape=("n",)),
    ...                            pl.ArrayArg("a", "float32", shape=("n",))])
    >>> mod = pl.build(knl)
    >>> out = np.zeros(4, "float32")
    >>> try:
    ...     mod(out=out, idx=np.array([0, 1, 7], "int32"), a=np.ones(3, "float32"))
    ... except pl.IndexOutOfBounds as e:
    ...     print(isinstance(e, IndexError), "idx[i]" in str(e), "7" in str(e))
    True True True
    >>> out
    array([1., 1., 0., 0.], dtype=float32)
    """


class DeviceError(PolyloopError):
    """No device can run the module (no CUDA GPU or driver here), or the device failed.

    Where no CUDA device is found, calling a module built with ``target="cuda"`` raises it;
    catch it as any ``PolyloopError``:

    >>> import polyloop as pl
    >>> issubclass(pl.DeviceError, pl.PolyloopError)
    True
    """


F = TypeVar("F", bound=Callable[..., Any])
QUOTE_LIMIT = 200


def _quoted(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The first text argument, shortened, to show what was being read."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, str):
            short = value if len(value) <= QUOTE_LIMIT else value[:QUOTE_LIMIT] + "..."
            return f"\n  input: {short!r}"
    return ""


def as_polyloop_error(entry: str, exc: BaseException, quoted: str = "",
                      error: type[PolyloopError] = ParseError) -> PolyloopError:
    """The ``PolyloopError`` a foreign exception ``exc`` raised under ``entry`` becomes."""
    if isinstance(exc, (RecursionError, MemoryError)):   # Python's parser: "too deep" is OOM
        reason = ("the input is nested too deeply, or is too long, to process; split it into "
                  "smaller pieces, using temporaries for parts of long expressions")
    elif isinstance(exc, UnicodeError):
        reason = f"the input is not valid text ({exc}); pass a str, or bytes in UTF-8"
    else:
        reason = (f"could not process this input ({type(exc).__name__}: {exc}); if the input "
                  "is valid, this is a polyloop bug: please report it with the input")
    err = error(f"{entry}: {reason}{quoted}")
    err.internal = exc  # type: ignore[attr-defined]
    return err


def foreign_errors(entry: str, error: type[PolyloopError] = ParseError) -> Callable[[F], F]:
    """Decorate a public entry point so that any exception other than a ``PolyloopError``
    becomes ``error`` (``KeyboardInterrupt`` and ``SystemExit`` pass: they are no
    ``Exception``). A ``MemoryError`` is converted too: Python's own parser raises it for
    input nested too deeply."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except PolyloopError:
                raise
            except Exception as exc:  # noqa: BLE001 - this is the boundary that converts them
                raise as_polyloop_error(entry, exc, _quoted(args, kwargs), error) from None
        return guarded  # type: ignore[return-value]
    return decorate
