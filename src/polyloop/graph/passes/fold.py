# SPDX-License-Identifier: Apache-2.0
"""Constant folding: calls on constants only are computed now; batch norm after a convolution
with constant weights is folded into the weights and bias; constant dense weights are stored
transposed (contiguous along the output features, the axis the kernels vectorize)."""
from __future__ import annotations

import numpy as np

from ..ir import Call, Constant, Graph, Op, TensorType, Value, uses

_NUMPY = {
    Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide,
    Op.NEG: np.negative, Op.SQRT: np.sqrt, Op.EXP: np.exp,
}


class _Folder:
    def __init__(self, g: Graph) -> None:
        self.g = g
        self.data = g.constant_data()
        self.new: list[Constant] = []
        self.count = uses(g)
        self.producer = {v.name: b for b in g.bindings for v in b.outputs}
        self.names = {v.name for v in g.inputs} | set(self.data) | set(self.producer)

    def constant(self, arr: np.ndarray, hint: str) -> Value:
        name, k = hint, 1
        while name in self.names:
            name, k = f"{hint}_{k}", k + 1
        self.names.add(name)
        arr = np.require(arr, requirements="C")
        v = Value(name, TensorType(tuple(arr.shape), arr.dtype.name))
        self.data[name] = arr
        self.new.append(Constant(v, arr))
        return v

    def evaluate(self, c: Call) -> np.ndarray | None:
        args = [self.data.get(v.name) for v in c.inputs]
        if any(a is None for a in args):
            return None
        if c.op in _NUMPY:
            out = _NUMPY[c.op](*args)
        elif c.op is Op.RESHAPE:
            out = args[0].reshape(c.outputs[0].type.shape)
        elif c.op is Op.PERMUTE:
            out = np.transpose(args[0], c.attr("axes"))
        else:
            return None
        return np.asarray(out, dtype=c.outputs[0].type.dtype)


def _bn_into_conv(f: _Folder, bn: Call, bindings: list) -> bool:
    conv = f.producer.get(bn.inputs[0].name)
    if not (isinstance(conv, Call) and conv.op is Op.CONV2D and bindings and bindings[-1] is conv
            and f.count.get(conv.outputs[0].name) == 1):
        return False
    params = [f.data.get(v.name) for v in (*conv.inputs[1:], *bn.inputs[1:])]
    if any(p is None for p in params):
        return False
    w = params[0]
    bias = params[1] if len(conv.inputs) == 3 else np.zeros(w.shape[0], w.dtype)
    gamma, beta, mean, var = params[-4:]
    scale = gamma / np.sqrt(var + float(bn.attr("eps", 1e-5)))
    name = conv.outputs[0].name
    new_w = f.constant((w * scale[:, None, None, None]).astype(w.dtype), f"{name}_w_folded")
    new_b = f.constant(((bias - mean) * scale + beta).astype(w.dtype), f"{name}_b_folded")
    bindings[-1] = Call(bn.outputs, Op.CONV2D, (conv.inputs[0], new_w, new_b), conv.attrs)
    return True


def _transpose_dense(f: _Folder, c: Call) -> Call:
    if c.op is not Op.LINEAR or c.attr("transposed"):
        return c
    w = f.data.get(c.inputs[1].name)
    if w is None:
        return c
    wt = f.constant(w.T.copy(), f"{c.inputs[1].name}_t")
    attrs = tuple(sorted({**dict(c.attrs), "transposed": True}.items()))
    return Call(c.outputs, c.op, (c.inputs[0], wt) + c.inputs[2:], attrs)


def fold_constants(g: Graph) -> Graph:
    """Fold constants (see the module docstring); unused constants are left to dead-code removal.

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (2,))
    >>> two = b.emit(pl.graph.Op.ADD, b.constant(np.ones(2, "float32")), b.constant(np.ones(2, "float32")))
    >>> g = pl.graph.passes.fold_constants(b.build(b.emit(pl.graph.Op.MUL, x, two)))
    >>> [str(c.op) for c in g.bindings]
    ['mul']
    """
    f = _Folder(g)
    bindings: list = []
    for b in g.bindings:
        if isinstance(b, Call):
            value = f.evaluate(b)
            if value is not None:
                out = b.outputs[0]
                f.data[out.name] = value
                f.new.append(Constant(out, np.require(value, requirements="C")))
                continue
            if b.op is Op.BATCH_NORM and _bn_into_conv(f, b, bindings):
                continue
            b = _transpose_dense(f, b)
        bindings.append(b)
    return g.replace(constants=g.constants + tuple(f.new), bindings=tuple(bindings))
