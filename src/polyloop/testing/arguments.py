# SPDX-License-Identifier: Apache-2.0
"""Bind the arguments of an interpreter call the way a built module binds them.

Arrays come positionally in ``program.args`` order or by buffer name; size parameters come by
keyword or are inferred from the shapes of the given arrays. Outputs that are not given and
temporaries are allocated, filled with NaN (floats) or a sentinel (integers) so that a read of
an element nobody wrote shows up in the result.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, PolyloopError
from ..ir.expr import Expr, Var, VarKind, as_expr, walk
from ..ir.program import Buffer, BufferRole, Program
from ..ir.shapes import evaluate


@dataclass(frozen=True, slots=True)
class Binding:
    """What one call determines: size parameters, the array of every buffer, what to return."""
    params: dict[str, int]
    arrays: dict[str, np.ndarray]
    returned: tuple[str, ...]


def evaluate_shape(e: Expr | int, params: dict[str, int]) -> int:
    """The integer value of a shape expression with the size parameters bound."""
    return evaluate(as_expr(e), params)


def bind(program: Program, positional: tuple, named: dict) -> Binding:
    """Check one call and allocate what it does not pass; raise ArgumentError on a mistake."""
    args = program.arg_buffers()
    arrays, given_params = _place(program, args, positional, named)
    for b in args:
        _check_array(b, arrays.get(b.name))
    params = _infer(program, args, arrays, given_params)
    for b in args:
        if b.name in arrays:
            _check_shape(b, arrays[b.name], params)
    returned = tuple(b.name for b in args if b.name not in arrays)
    for b in program.buffers:
        if b.name not in arrays:
            arrays[b.name] = _allocate(b, params)
    return Binding(params, arrays, returned)


def _place(program: Program, args: list[Buffer], positional: tuple,
           named: dict) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    if len(positional) > len(args):
        raise ArgumentError(f"{program.name}() takes at most {len(args)} arrays "
                            f"({', '.join(b.name for b in args)}), got {len(positional)}")
    arrays = {b.name: a for b, a in zip(args, positional)}
    known = _all_params(program)
    params: dict[str, int] = {}
    for key, value in named.items():
        if key in arrays:
            raise ArgumentError(f"{program.name}() got argument '{key}' both positionally "
                                "and by name")
        if any(b.name == key for b in args):
            arrays[key] = value
        elif key in known:
            params[key] = _param_value(program, key, value)
        else:
            raise ArgumentError(
                f"{program.name}() got an unknown argument '{key}'; arguments are "
                f"{', '.join(b.name for b in args) or 'none'} and size parameters "
                f"{', '.join(known) or 'none'}")
    for b in args:
        if b.name not in arrays and b.role is not BufferRole.OUTPUT:
            raise ArgumentError(f"{program.name}() is missing {b.role.value} array '{b.name}' "
                                f"({_spelling(b)})")
    return arrays, params


def _all_params(program: Program) -> list[str]:
    found = dict.fromkeys(program.params)
    for b in program.buffers:
        for d in b.shape:
            found.update(dict.fromkeys(v.name for v in walk(as_expr(d))
                                       if isinstance(v, Var) and v.kind is VarKind.PARAM))
    return list(found)


def _param_value(program: Program, name: str, value: object) -> int:
    if isinstance(value, (bool, np.bool_)):
        value = None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ArgumentError(f"size parameter '{name}' of {program.name}() must be an integer, "
                            f"got {type(value).__name__} {value!r}") from None


def _spelling(b: Buffer) -> str:
    return f"{b.dtype}[{', '.join(str(d) for d in b.shape)}]"


def _check_array(b: Buffer, a: object) -> None:
    if a is None:
        return
    if not isinstance(a, np.ndarray):
        raise ArgumentError(f"argument '{b.name}' must be a NumPy array ({_spelling(b)}), got "
                            f"{type(a).__name__}; convert it with np.asarray(x, '{b.dtype}')")
    if a.ndim != b.ndim or a.dtype != b.dtype.numpy:
        raise ArgumentError(f"argument '{b.name}' must be {_spelling(b)}, got {a.dtype} array "
                            f"of shape {a.shape}")
    if b.role is not BufferRole.INPUT and not a.flags.writeable:
        raise ArgumentError(f"argument '{b.name}' is written ({b.role.value}) but the given "
                            "array is read-only; pass a writeable copy")


def _infer(program: Program, args: list[Buffer], arrays: dict[str, np.ndarray],
           params: dict[str, int]) -> dict[str, int]:
    """Bind size parameters from dimensions that are a bare parameter, then solve affine ones."""
    source = {p: "keyword" for p in params}
    dims = [(b, k, e, arrays[b.name].shape[k]) for b in args if b.name in arrays
            for k, e in enumerate(b.shape)]
    for b, k, e, size in dims:
        if isinstance(e, Var) and e.kind is VarKind.PARAM:
            here = f"{b.name}.shape[{k}]"
            if e.name in params and params[e.name] != size:
                raise ArgumentError(f"size parameter '{e.name}' is {params[e.name]} from "
                                    f"{source[e.name]} but {size} from {here}")
            params.setdefault(e.name, size)
            source.setdefault(e.name, here)
    progress = True
    while progress:
        progress = False
        for b, k, e, size in dims:
            unknown = {v.name for v in walk(as_expr(e)) if isinstance(v, Var)} - set(params)
            if len(unknown) == 1:
                name = unknown.pop()
                value = _solve(e, name, size, params)
                if value is not None:
                    params[name] = value
                    progress = True
    missing = [p for p in _all_params(program) if p not in params]
    if missing:
        example = ", ".join(f"{p}=..." for p in missing)
        raise ArgumentError(f"cannot infer size parameter(s) {', '.join(missing)} of "
                            f"{program.name}() from the shapes of the arguments; pass them by "
                            f"keyword: interpret(program, ..., {example})")
    return params


def _solve(e: Expr, name: str, size: int, params: dict[str, int]) -> int | None:
    """The value of ``name`` making ``e == size``, when e is affine in it (checked)."""
    try:
        at0 = evaluate_shape(e, {**params, name: 0})
        slope = evaluate_shape(e, {**params, name: 1}) - at0
        if slope == 0 or (size - at0) % slope:
            return None
        value = (size - at0) // slope
        return value if evaluate_shape(e, {**params, name: value}) == size else None
    except PolyloopError:
        return None


def _check_shape(b: Buffer, a: np.ndarray, params: dict[str, int]) -> None:
    expected = tuple(evaluate_shape(d, params) for d in b.shape)
    if a.shape != expected:
        env = ", ".join(f"{k}={v}" for k, v in params.items())
        raise ArgumentError(f"argument '{b.name}' has shape {a.shape}, expected {expected} "
                            f"= ({', '.join(str(d) for d in b.shape)}) with {env}")


def _allocate(b: Buffer, params: dict[str, int]) -> np.ndarray:
    shape = tuple(evaluate_shape(d, params) for d in b.shape)
    if any(d < 0 for d in shape):
        env = ", ".join(f"{k}={v}" for k, v in params.items())
        raise ArgumentError(f"buffer '{b.name}' would have negative shape {shape} with {env}")
    return np.full(shape, _fill_value(b), b.dtype.numpy)


def _fill_value(b: Buffer) -> object:
    if b.dtype.is_float:
        return np.nan
    if b.dtype.is_int:
        return np.iinfo(b.dtype.numpy).min
    return True
