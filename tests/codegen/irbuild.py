# SPDX-License-Identifier: Apache-2.0
"""Small builders for hand-written loop ASTs in the code generator tests."""
from __future__ import annotations

import numpy as np

from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Const, Expr, Var, VarKind, const
from polyloop.ir.loops import For, LoopKind, Node
from polyloop.ir.program import Buffer, BufferRole, MemScope

F32, F64, I32, I64 = DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT64
IN, OUT, INOUT, TEMP = BufferRole.INPUT, BufferRole.OUTPUT, BufferRole.INOUT, BufferRole.TEMP


def param(name: str) -> Var:
    return Var(name, VarKind.PARAM)


def buf(name: str, shape: tuple, dtype: DType, role: BufferRole = IN,
        scope: MemScope = MemScope.GLOBAL) -> Buffer:
    dims = tuple(s if isinstance(s, Expr) else const(s) for s in shape)
    return Buffer(name, dims, dtype, role, scope)


def loop(var: str, stop: Expr | int, body: Node, kind: LoopKind = LoopKind.SERIAL,
         start: Expr | int = 0, **kw: object) -> For:
    """``for var in range(start, stop)``."""
    start_e = start if isinstance(start, Expr) else const(start)
    stop_e = stop if isinstance(stop, Expr) else const(stop)
    return For(var, start_e, stop_e, body, kind, **kw)  # type: ignore[arg-type]


def c(value: float | int, dtype: DType) -> Const:
    return Const(value, dtype)


def poison(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An output array whose every element shows whether the kernel wrote it."""
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype=dtype)
    return np.full(shape, np.iinfo(dtype).min + 7, dtype=dtype)
