# SPDX-License-Identifier: Apache-2.0
"""A dense layer that ``dense_split_k`` runs (see ``dense_split``) on constant weights whose
columns are not whole vectors reads them padded with zero columns to whole vectors.

Its register tile holds rows of whole vectors; with the weights as stored, the last vector of
each weight row is a masked load, and the C compiler then keeps the accumulators in memory
(a store after every FMA): 100 columns on 4 rows ran at two thirds of the speed. The padded
copy (``<weight>_wide``, one ``pack_matmul_weight`` panel, made once) has plain loads only.
The kernel's calls say so: ``matmul`` on the panel with ``columns``, then the bias ``add``
and the ``relu`` if any.
"""
from __future__ import annotations

import numpy as np

from ... import ops
from ...ops.knobs import default_lanes
from ..ir import Call, Constant, Graph, Kernel, KernelCall, Op, TensorType, Value
from .dense_split import split_dense
from .merge import free_inputs


def _padded(kc: KernelCall, data: dict[str, np.ndarray], new: list[Constant]) -> KernelCall:
    found = split_dense(kc)
    lanes = default_lanes("float32")
    if found is None or found.columns % lanes == 0 or len(found.weight.type.shape) != 2 \
            or found.weight.name not in data:
        return kc
    return _rewrite(kc, found, data, new, lanes)


def _rewrite(kc: KernelCall, found, data: dict[str, np.ndarray], new: list[Constant],
             lanes: int) -> KernelCall:
    weight = found.weight
    wide = -(-found.columns // lanes) * lanes
    packed = ops.pack_matmul_weight(data[weight.name], wide)
    value = Value(f"{weight.name}_wide", TensorType(packed.shape, weight.type.dtype))
    if all(c.value.name != value.name for c in new):
        new.append(Constant(value, packed))
    body = kc.kernel.body
    out = body[0].outputs[0]
    raw = Value(f"{out.name}_raw", out.type) if found.bias is not None else out
    calls = [Call((raw,), Op.MATMUL, (found.x, value), (("columns", found.columns),))]
    if found.bias is not None:
        calls.append(Call((out,), Op.ADD, (raw, found.bias)))
    calls += body[1:]
    params = free_inputs(tuple(calls))
    return KernelCall(kc.outputs, Kernel(kc.kernel.name, params, kc.outputs, tuple(calls)),
                      params)


def pad_dense_columns(g: Graph) -> Graph:
    """Each such dense layer (see the module docstring) on its zero-padded weights.

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (64, 100))
    >>> w = b.constant(np.ones((10, 100), "float32"))
    >>> g = pl.graph.optimize(b.build(b.emit(pl.graph.Op.LINEAR, x, w)))
    >>> [str(c.op) for c in g.bindings[0].kernel.body], g.constants[-1].data.shape[0]
    (['matmul'], 1)
    """
    data = g.constant_data()
    new: list[Constant] = []
    bindings = tuple(_padded(b, data, new) if isinstance(b, KernelCall) else b
                     for b in g.bindings)
    return g.replace(bindings=bindings, constants=g.constants + tuple(new))
