# SPDX-License-Identifier: Apache-2.0
"""Size inference for a call: the size parameters from the arrays' shapes, the shapes checked
against them, the outputs' shapes, and every size and byte count checked to fit an int64.

Mixed into :class:`polyloop.runtime.binding.Binder`, which holds the signature (``slots``,
``params``, ``assumptions``, ``temps``) and caches one :class:`Plan` per combination of shapes.
"""
from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

from ..errors import ArgumentError
from ..ir.assumption import Assumption
from ..ir.expr import Const, Expr, Var, walk
from ..ir.program import Buffer
from .shapes import Affine, evaluate, shape_to_str, solve, to_affine

# Sizes are int64 in the generated code, and so are the byte counts of its arrays.
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class DimRule:
    """How dimension ``dim`` of argument ``slot`` relates to the size parameters."""

    slot: int
    dim: int
    expr: Expr
    const: int | None       # a constant dimension
    param: str | None       # a dimension that is a bare size parameter
    affine: Affine | None   # a dimension a*n + b + ..., solvable for one unbound parameter


@dataclass(frozen=True, slots=True)
class Plan:
    """What the shapes of one call determine: parameter values and output shapes."""

    params: ctypes.Array
    allocations: tuple[tuple[int, tuple[int, ...]], ...]


class SizeInference:
    """The size-inference steps of a binder (see the module docstring)."""

    func: str
    params: tuple[str, ...]
    assumptions: tuple[Assumption, ...]
    temps: tuple[Buffer, ...]
    slots: tuple
    _rules: tuple[DimRule, ...]
    _params_type: type

    def _plan(self, arrays: list, given: dict[str, int]) -> Plan:
        env = dict(given)
        origin = {p: f"given as {p}={v}" for p, v in given.items()}
        rules = [r for r in self._rules if arrays[r.slot] is not None]
        # Sizes come from the inputs first, so that a wrong output is the one blamed.
        for group in ([r for r in rules if not self.slots[r.slot].written],
                      [r for r in rules if self.slots[r.slot].written]):
            self._bind_bare(group, arrays, env, origin)
            self._solve_affine(group, arrays, env, origin)
        for p in self.params:
            if p not in env:
                raise ArgumentError(
                    f"size parameter '{p}' of {self.func}() cannot be inferred from the shapes "
                    f"of the arrays given; pass it by name: {self.func}(..., {p}=...)")
        for r in rules:
            expected = evaluate(r.expr, env)
            if arrays[r.slot].shape[r.dim] != expected:
                raise ArgumentError(self._mismatch(r, arrays, expected, env, origin))
        self._check_sizes(env, origin)
        allocations = self._allocations(arrays, env, origin)
        for b in self.temps:
            self._check_bytes(b, "temporary", env, origin)
        return Plan(self._params_type(*(env[p] for p in self.params)), allocations)

    def _check_sizes(self, env: dict[str, int], origin: dict[str, str]) -> None:
        """Every size fits the kernel's int64 and every assumption of the program holds."""
        for p in self.params:
            if env[p] > INT64_MAX:
                raise ArgumentError(f"size parameter '{p}' of {self.func}() would be {env[p]} "
                                    f"({origin[p]}), more than the int64 the kernel computes "
                                    "sizes in holds")
        for a in self.assumptions:
            if not a.holds(env) and a.reason:
                raise ArgumentError(
                    f"{self.func}() needs {a}; got {self._bindings((a.condition,), env, origin)}"
                    f" (at those sizes {a.reason}); pass arrays whose sizes satisfy it")
            if not a.holds(env):
                raise ArgumentError(
                    f"{self.func}() was built assuming {a}, which this call breaks: "
                    f"{self._bindings((a.condition,), env, origin)}. The kernel relies on it "
                    "(bounds, loop counts); pass arrays whose sizes satisfy it, or build "
                    "without the assumption")

    def _check_bytes(self, b: Buffer, what: str, env: dict[str, int],
                     origin: dict[str, str]) -> tuple[int, ...]:
        """The shape of ``b``, after checking that its byte count fits a 64-bit size."""
        shape = tuple(evaluate(d, env) for d in b.shape)
        nbytes = math.prod(max(s, 0) for s in shape) * b.dtype.itemsize
        if nbytes > INT64_MAX:
            raise ArgumentError(
                f"{self.func}() would need {what} '{b.name}' of shape {shape_to_str(b)} = "
                f"{shape}: {nbytes} bytes, more than a 64-bit size holds "
                f"({self._bindings(b.shape, env, origin)}); use smaller sizes")
        return shape

    def _bind_bare(self, rules: list[DimRule], arrays: list, env: dict[str, int],
                   origin: dict[str, str]) -> None:
        for r in rules:
            size = arrays[r.slot].shape[r.dim]
            if r.const is not None and size != r.const:
                raise ArgumentError(self._mismatch(r, arrays, r.const, {}, {}))
            if r.param is None:
                continue
            if r.param in env and env[r.param] != size:
                slot = self.slots[r.slot]
                raise ArgumentError(
                    f"inconsistent size '{r.param}' in {self.func}(): {r.param} = "
                    f"{env[r.param]} {origin[r.param]} but {size} from {self._dim(r)} "
                    f"(argument '{slot.name}' must have shape {shape_to_str(slot.buffer)}, "
                    f"got shape {arrays[r.slot].shape})")
            env.setdefault(r.param, size)
            origin.setdefault(r.param, f"from {self._dim(r)}")

    def _solve_affine(self, rules: list[DimRule], arrays: list, env: dict[str, int],
                      origin: dict[str, str]) -> None:
        progress = True
        while progress:
            progress = False
            for r in rules:
                unbound = [p for p in r.affine.params if p not in env] if r.affine else []
                if len(unbound) != 1:
                    continue
                size = arrays[r.slot].shape[r.dim]
                solution = solve(r.affine, size, env)  # type: ignore[arg-type]
                where = f"{self._dim(r)} = {size} = {r.expr}"
                if solution is None:
                    raise ArgumentError(f"argument '{self.slots[r.slot].name}' of {self.func}(): "
                                        f"{self._dim(r)} = {size} is not {r.expr} for any "
                                        f"integer {unbound[0]}")
                if solution[1] < 0:
                    raise ArgumentError(f"size parameter '{unbound[0]}' of {self.func}() would "
                                        f"be {solution[1]} (from {where}); sizes must be >= 0")
                env[unbound[0]] = solution[1]
                origin[unbound[0]] = f"from {where}"
                progress = True

    def _allocations(self, arrays: list, env: dict[str, int],
                     origin: dict[str, str]) -> tuple[tuple[int, tuple[int, ...]], ...]:
        out = []
        for slot in self.slots:
            if arrays[slot.index] is not None:
                continue
            shape = self._check_bytes(slot.buffer, "output", env, origin)
            if any(s < 0 for s in shape):
                raise ArgumentError(
                    f"cannot allocate output '{slot.name}' of {self.func}(): its shape "
                    f"{shape_to_str(slot.buffer)} evaluates to {shape} "
                    f"({self._bindings(slot.buffer.shape, env, origin)}); sizes must be >= 0")
            out.append((slot.index, shape))
        return tuple(out)

    # messages ------------------------------------------------------------------------------------
    def _dim(self, r: DimRule) -> str:
        return f"{self.slots[r.slot].name}.shape[{r.dim}]"

    def _mismatch(self, r: DimRule, arrays: list, expected: int, env: dict[str, int],
                  origin: dict[str, str]) -> str:
        slot = self.slots[r.slot]
        rule = str(r.expr) if r.const is not None else f"{r.expr} = {expected}"
        bound = self._bindings((r.expr,), env, origin)
        return (f"argument '{slot.name}' of {self.func}() must have shape "
                f"{shape_to_str(slot.buffer)}, got shape {arrays[r.slot].shape}: {self._dim(r)} "
                f"must be {rule}, got {arrays[r.slot].shape[r.dim]}"
                + (f" ({bound})" if bound else ""))

    def _bindings(self, exprs: tuple[Expr, ...], env: dict[str, int],
                  origin: dict[str, str]) -> str:
        names = sorted({v.name for e in exprs for v in walk(e) if isinstance(v, Var)})
        return ", ".join(f"{p} = {env[p]} {origin[p]}" for p in names if p in env)


def dim_rule(slot: int, dim: int, e: Expr) -> DimRule:
    if isinstance(e, Const):
        return DimRule(slot, dim, e, evaluate(e, {}), None, None)
    if isinstance(e, Var):
        return DimRule(slot, dim, e, None, e.name, None)
    form = to_affine(e)
    if form is not None and not form.coeffs:
        return DimRule(slot, dim, e, form.constant, None, None)
    return DimRule(slot, dim, e, None, None, form)
