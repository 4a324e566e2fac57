# SPDX-License-Identifier: Apache-2.0
"""Kernels written by the user with tensor expressions (``GraphBuilder.emit_te``)."""
from __future__ import annotations

from ...errors import PolyloopError
from ...frontend import te
from ...frontend.te import Tensor
from ...ir.expr import Const, Var
from ...ir.program import BufferRole


def te_dim(d: object) -> int | str:
    if isinstance(d, Const):
        return int(d.value)
    if isinstance(d, Var):
        return d.name
    raise PolyloopError(f"emit_te: the result dimension {d} is neither a constant nor a size "
                        "parameter; the graph needs one of those")


def call_te(fn, inputs) -> Tensor:
    """``fn`` applied to a placeholder per input value; its result must be a computed tensor."""
    holders = [te.placeholder(tuple(te.var(d) if isinstance(d, str) else d
                                    for d in v.type.shape), v.type.dtype, name=v.name)
               for v in inputs]
    result = _checked(fn, holders)
    read = {b.name for b in result.to_program().buffers if b.role is BufferRole.INPUT}
    unread = [v.name for v, h in zip(inputs, holders) if h.name not in read]
    if unread:     # a kernel's arguments are its inputs in order: an unread one would shift them
        raise PolyloopError(f"emit_te: {getattr(fn, '__qualname__', fn)} does not read the "
                            f"input(s) {unread} it was given; pass only the values its result "
                            "reads")
    return result


def _checked(fn, tensors) -> Tensor:
    result = fn(*tensors)
    if not isinstance(result, Tensor) or result.is_placeholder:
        raise PolyloopError(f"emit_te: {getattr(fn, '__qualname__', fn)} must return a tensor "
                            f"computed with pl.compute, got {result!r}")
    return result


def lower_te(inputs, attrs, shape, name):
    return _checked(attrs["fn"], inputs)


CUSTOM = {"te": lower_te}
