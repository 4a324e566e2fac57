# SPDX-License-Identifier: Apache-2.0
"""Lowering a fused kernel of the graph to tensor expressions (one ``pl.compute`` per stage)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import PolyloopError
from ..frontend import te
from ..frontend.te import Tensor
from .ir import Kernel, TensorType
from .oplib import LOWERINGS


@dataclass(frozen=True, slots=True, eq=False)
class LoweredKernel:
    """The te form of a kernel: placeholders (its parameters, in order) and results."""

    kernel: Kernel
    params: tuple[Tensor, ...]
    results: tuple[Tensor, ...]


def te_shape(t: TensorType) -> tuple:
    return tuple(te.var(d) if isinstance(d, str) else d for d in t.shape)


def lower_kernel(k: Kernel) -> LoweredKernel:
    """The tensor expressions of ``k``: each call through the operator library.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (4, 3))
    >>> g = pl.graph.passes.fuse_operators(b.build(b.emit(pl.graph.Op.RELU, x)))
    >>> lower_kernel(g.bindings[0].kernel).results
    (Tensor(relu: float32[4, 3]),)
    """
    env: dict[str, Tensor] = {v.name: te.placeholder(te_shape(v.type), v.type.dtype, name=v.name)
                              for v in k.params}
    params = tuple(env[v.name] for v in k.params)
    for call in k.body:
        out = call.outputs[0]
        try:
            t = LOWERINGS[call.op]([env[v.name] for v in call.inputs], dict(call.attrs),
                                   te_shape(out.type), out.name)
        except PolyloopError as e:
            raise PolyloopError(f"lowering {call.op} '{out.name}' of kernel {k.name}: {e}") \
                from None
        if str(t.dtype) != out.type.dtype:
            raise PolyloopError(f"lowering {call.op} '{out.name}': the tensor expression has "
                                f"dtype {t.dtype}, the graph says {out.type.dtype}")
        env[out.name] = t
    return LoweredKernel(k, params, tuple(env[v.name] for v in k.results))
