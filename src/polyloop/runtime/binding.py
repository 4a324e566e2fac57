# SPDX-License-Identifier: Apache-2.0
"""Bind the arrays of one call to a kernel's signature: check them, infer the size parameters.

Every call is checked before the kernel runs, because a generated kernel trusts its arguments:
a wrong shape would make it read or write out of bounds. The checks that depend only on the
shapes (size inference, shape verification, output shapes) are cached per distinct combination
of shapes, so a repeated call costs a dictionary lookup.
"""
from __future__ import annotations

import ctypes
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ArgumentError, PolyloopError
from ..ir.assumption import Assumption
from ..ir.expr import Var, VarKind, walk
from ..ir.program import Buffer, BufferRole
from .pointers import data_pointer_reader
from .shapes import shape_to_str
from .size_inference import INT64_MAX, DimRule, Plan, SizeInference, dim_rule

__all__ = ["Binder", "DimRule", "Plan", "Slot", "shape_to_str"]

_SCALARS = (int, float, bool, np.generic)

# Distinct shape combinations remembered per kernel; the cache is cleared when it fills up.
_PLAN_CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Slot:
    """One argument of the signature, with what a call must satisfy."""

    index: int
    buffer: Buffer
    dtype: np.dtype
    ndim: int
    written: bool
    required: bool

    @property
    def name(self) -> str:
        return self.buffer.name


class Binder(SizeInference):
    """Checks calls of the kernel ``func`` with arguments ``args`` and size parameters ``params``.

    Every size is checked to fit the kernel's int64, every ``assumptions`` condition to hold,
    and every output and temporary (``temps``) to have a byte count a 64-bit size can hold;
    these checks depend on the shapes only, so they run once per distinct combination.

    >>> from polyloop.ir.dtypes import DType
    >>> from polyloop.ir.program import Buffer, BufferRole, param
    >>> n = param("n")
    >>> x = Buffer("x", (n,), DType.FLOAT32, BufferRole.INPUT)
    >>> y = Buffer("y", (n,), DType.FLOAT32, BufferRole.OUTPUT)
    >>> arrays, pointers, plan = Binder("f", (x, y), ("n",)).bind((np.ones(3, "float32"),), {})
    >>> list(plan.params), plan.allocations
    ([3], ((1, (3,)),))
    """

    def __init__(self, func: str, args: tuple[Buffer, ...], params: tuple[str, ...], *,
                 assumptions: tuple[Assumption, ...] = (),
                 temps: tuple[Buffer, ...] = (),
                 zeroed: frozenset[str] = frozenset()) -> None:
        self.func = func
        self.zeroed = zeroed    # outputs the kernel may not write everywhere: allocated zeroed
        self.params = params
        _check_signature(func, args, params)
        _check_assumptions(func, assumptions, params)
        self.assumptions = tuple(assumptions)
        self.temps = tuple(temps)
        self.slots = tuple(Slot(i, b, b.dtype.numpy, b.ndim, b.role is not BufferRole.INPUT,
                                b.role is not BufferRole.OUTPUT) for i, b in enumerate(args))
        self._index = {b.name: i for i, b in enumerate(args)}
        self._param_set = frozenset(params)
        self._rules = tuple(dim_rule(i, d, e) for i, b in enumerate(args)
                            for d, e in enumerate(b.shape))
        self._written = tuple(s.index for s in self.slots if s.written)
        self._params_type = ctypes.c_int64 * len(params)
        self._plans: dict[Any, Plan] = {}
        self._pointer = data_pointer_reader()

    @property
    def requires(self) -> tuple[str, ...]:
        """Every condition on the sizes a call checks, as text."""
        return tuple(str(a) for a in self.assumptions)

    def bind(self, positional: tuple, named: dict) -> tuple[list, list[int], Plan]:
        """Check one call; return the arrays (outputs allocated), their data pointers, the plan."""
        n = len(self.slots)
        if len(positional) > n:
            raise ArgumentError(f"{self.func}() takes at most {n} arrays "
                                f"({', '.join(s.name for s in self.slots)}), got {len(positional)}")
        arrays = list(positional) + [None] * (n - len(positional))
        given = self._place_named(arrays, len(positional), named) if named else None
        read = self._pointer
        shapes, pointers = [], []
        for slot, a in zip(self.slots, arrays):
            if a is None:
                if slot.required:
                    raise ArgumentError(self._missing(slot))
                shapes.append(None)
                pointers.append(0)
                continue
            if slot.ndim == 0 and not slot.written and isinstance(a, _SCALARS):
                # a value argument (a script's ``alpha: float``) may be passed as a number
                a = arrays[slot.index] = np.asarray(a, dtype=slot.dtype)
            if (type(a) is not np.ndarray or a.ndim != slot.ndim or a.dtype != slot.dtype
                    or not a.flags.c_contiguous or (slot.written and not a.flags.writeable)):
                self._explain(slot, a)
            shapes.append(a.shape)
            pointers.append(read(a))
        key = (tuple(shapes), tuple(sorted(given.items()))) if given else tuple(shapes)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(arrays, given or {})
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        if len(positional) + len(named) > 1:
            self._check_aliasing(arrays, pointers)
        for index, shape in plan.allocations:
            slot = self.slots[index]
            allocate = np.zeros if slot.name in self.zeroed else np.empty
            try:
                a = arrays[index] = allocate(shape, slot.dtype)
            except MemoryError:
                raise ArgumentError(f"cannot allocate output '{slot.name}' of "
                                    f"{self.func}() with shape {shape}: out of memory; pass it "
                                    "as an argument, or use smaller sizes") from None
            pointers[index] = read(a)
        return arrays, pointers, plan

    # argument placement ------------------------------------------------------------------------
    def _place_named(self, arrays: list, n_positional: int, named: dict) -> dict[str, int]:
        given: dict[str, int] = {}
        for key, value in named.items():
            i = self._index.get(key)
            if i is not None:
                if i < n_positional:
                    raise ArgumentError(f"{self.func}() got argument '{key}' twice: "
                                        f"positionally (position {i}) and by name")
                arrays[i] = value
            elif key in self._param_set:
                given[key] = self._param_value(key, value)
            else:
                raise ArgumentError(
                    f"{self.func}() got an unknown argument '{key}'; arguments are "
                    f"{', '.join(s.name for s in self.slots) or 'none'} and size parameters "
                    f"{', '.join(self.params) or 'none'}")
        return given

    def _param_value(self, name: str, value: object) -> int:
        try:
            v = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            v = None
        if v is None or isinstance(value, (bool, np.bool_)):
            raise ArgumentError(f"size parameter '{name}' of {self.func}() must be an integer, "
                                f"got {type(value).__name__} {value!r}")
        if v < 0:
            raise ArgumentError(f"size parameter '{name}' of {self.func}() must be >= 0, got {v}")
        if v > INT64_MAX:
            raise ArgumentError(f"size parameter '{name}' of {self.func}() must be at most "
                                f"2**63 - 1 = {INT64_MAX} (the kernel computes sizes in int64), "
                                f"got {v}")
        return v

    # per-array checks ----------------------------------------------------------------------------
    def _missing(self, slot: Slot) -> str:
        return (f"{self.func}() is missing argument '{slot.name}' ({slot.buffer.role.value} "
                f"{shape_to_str(slot.buffer)}); pass it positionally or as {slot.name}=...")

    def _explain(self, slot: Slot, a: object) -> None:
        """Raise the ArgumentError for the first property of ``a`` that the slot rejects."""
        what = f"argument '{slot.name}' of {self.func}()"
        spec = shape_to_str(slot.buffer)
        if not isinstance(a, np.ndarray):
            raise ArgumentError(f"{what} must be a numpy.ndarray of {spec}, got "
                                f"{type(a).__name__}; convert it with "
                                f"np.asarray({slot.name}, dtype=np.{slot.dtype})")
        if a.ndim != slot.buffer.ndim:
            raise ArgumentError(f"{what} must have {slot.buffer.ndim} dimension(s) ({spec}), "
                                f"got an array with {a.ndim} of shape {a.shape}")
        if a.dtype != slot.dtype:
            raise ArgumentError(f"{what} must have dtype {slot.dtype}, got {a.dtype}; convert "
                                f"it with {slot.name}.astype(np.{slot.dtype})")
        if not a.flags.c_contiguous:
            raise ArgumentError(f"{what} must be C-contiguous, got a strided array of shape "
                                f"{a.shape}; pass np.ascontiguousarray({slot.name})")
        if slot.written and not a.flags.writeable:
            raise ArgumentError(f"{what} is written by the kernel ({slot.buffer.role.value}) "
                                f"but the array is read-only; pass a writeable array, "
                                f"e.g. {slot.name}.copy()")

    def _check_aliasing(self, arrays: list, pointers: list[int]) -> None:
        """A written argument must not overlap any other argument: the C code uses restrict."""
        for w in self._written:
            if arrays[w] is None or arrays[w].nbytes == 0:
                continue
            lo, hi = pointers[w], pointers[w] + arrays[w].nbytes
            for j, a in enumerate(arrays):
                # C-contiguous arrays occupy exactly [pointer, pointer + nbytes).
                if (j != w and a is not None and a.nbytes and pointers[j] < hi
                        and lo < pointers[j] + a.nbytes):
                    raise ArgumentError(
                        f"argument '{self.slots[w].name}' of {self.func}() is written by the "
                        f"kernel and shares memory with argument '{self.slots[j].name}'; the "
                        "generated code assumes arguments do not overlap, pass separate arrays "
                        f"(e.g. {self.slots[j].name}.copy())")

def _check_signature(func: str, args: tuple[Buffer, ...], params: tuple[str, ...]) -> None:
    """Reject signatures the calling convention cannot express; these are compiler bugs."""
    names = [b.name for b in args] + list(params)
    duplicates = sorted({x for x in names if names.count(x) > 1})
    if duplicates:
        raise PolyloopError(f"kernel {func}: the names {', '.join(duplicates)} are used twice "
                            "among arguments and size parameters")
    for b in args:
        if b.role is BufferRole.TEMP:
            raise PolyloopError(f"kernel {func}: buffer '{b.name}' is a temporary and cannot be "
                                "an argument")
        for d in b.shape:
            for v in walk(d):
                if isinstance(v, Var) and (v.kind is not VarKind.PARAM or v.name not in params):
                    raise PolyloopError(
                        f"kernel {func}: the shape of '{b.name}' uses '{v.name}', which is not "
                        f"one of its size parameters ({', '.join(params) or 'none'})")


def _check_assumptions(func: str, assumptions: tuple[Assumption, ...],
                       params: tuple[str, ...]) -> None:
    """An assumption may only read size parameters of the kernel; else it is a compiler bug."""
    for a in assumptions:
        unknown = [p for p in a.params if p not in params]
        if unknown:
            raise PolyloopError(f"kernel {func}: assumption {a} uses {', '.join(unknown)}, "
                                f"which are not among its size parameters "
                                f"({', '.join(params) or 'none'})")
