# SPDX-License-Identifier: Apache-2.0
"""Channels-last 8-bit activations between consecutive integer layers.

An int8 convolution's tile computes its outputs pixel-major (output channels innermost), and
reads its input in groups of channels per pixel: between two such layers an NCHW activation
costs two transpositions (the result into NCHW, the input out of it), up to a third of a
layer with few channels. ``channels_last_int8`` keeps an 8-bit activation in NHWC wherever
every reader takes it so: the input of an integer convolution (``IntegerConv``), or an
operand of an integer addition (``IntegerAdd``, elementwise: its operands and result then
share the layout), flat or through the reshapes to and from one dimension that a residual
addition's importer puts around it, or the input of a max pool (which then runs as an
``IntegerMaxPool``, vector code along the channels, its result NHWC too). An activation with any other reader (a pool, a float
dequantization, a model output) stays NCHW, and so do the additions it takes part in: the
layout changes only at the borders of the integer region, inside the convolutions that read
or write it.
"""
from __future__ import annotations

import dataclasses
import hashlib

from ..integer import IntegerAdd, IntegerConv, IntegerMaxPool
from ..ir import Call, Graph, Op, TensorType, Value
from ..kinds import PoolFn
from ..oplib.custom import call_te

_EIGHT_BIT = ("int8", "uint8")


@dataclasses.dataclass(frozen=True)
class _Addition:
    """An integer addition of two 4-D values ``a``, ``b`` into ``out``: its call and, for the
    flat form, the reshapes around it (``back`` makes ``out``)."""
    a: str
    b: str
    out: str
    add: int
    back: int | None


def _fn(c, kind) -> bool:
    return isinstance(c, Call) and c.op is Op.TE and isinstance(c.attr("fn"), kind)


def _four_d(v: Value) -> bool:
    return len(v.type.shape) == 4 and v.type.dtype in _EIGHT_BIT


def _readers(g: Graph) -> dict[str, list[tuple[int, int]]]:
    """Each value's readers: (binding index, input position); a model output is (-1, 0)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for i, b in enumerate(g.bindings):
        for k, v in enumerate(b.inputs):
            found.setdefault(v.name, []).append((i, k))
    for v in g.outputs:
        found.setdefault(v.name, []).append((-1, 0))
    return found


def _additions(g: Graph, readers) -> list[_Addition]:
    """The integer additions of two 4-D 8-bit values of one shape, flat (through reshapes
    read by nothing else) or not."""
    made = {v.name: i for i, b in enumerate(g.bindings) for v in b.outputs}
    found = []
    for i, c in enumerate(g.bindings):
        if not _fn(c, IntegerAdd) or len(c.inputs) != 2:
            continue
        if all(_four_d(v) for v in (*c.inputs, c.outputs[0])):
            found.append(_Addition(c.inputs[0].name, c.inputs[1].name, c.outputs[0].name, i,
                                   None))
            continue
        flat = [g.bindings[made[v.name]] if v.name in made else None for v in c.inputs]
        after = readers.get(c.outputs[0].name, [])
        if any(f is None or f.op is not Op.RESHAPE or not _four_d(f.inputs[0])
               or len(readers[f.outputs[0].name]) != 1 for f in flat) or len(after) != 1 \
                or after[0][0] < 0:
            continue
        back = g.bindings[after[0][0]]
        a, b = flat[0].inputs[0], flat[1].inputs[0]
        if back.op is Op.RESHAPE and _four_d(back.outputs[0]) \
                and a.type.shape == b.type.shape == back.outputs[0].type.shape:
            found.append(_Addition(a.name, b.name, back.outputs[0].name, i, after[0][0]))
    return found


def _pools(g: Graph) -> dict[int, tuple[str, str]]:
    """The max pools of 4-D 8-bit values with no dilation: binding index -> (input, output)."""
    return {i: (c.inputs[0].name, c.outputs[0].name) for i, c in enumerate(g.bindings)
            if isinstance(c, Call) and c.op is Op.POOL and c.attr("fn") is PoolFn.MAX
            and _four_d(c.inputs[0]) and tuple(c.attr("dilations")) == (1, 1)}


def _pool(c: Call, inputs: tuple[Value, ...]) -> Call:
    """The max pool ``c`` as an ``IntegerMaxPool`` on its NHWC input."""
    out = _nhwc(c.outputs[0])
    pads = c.attr("pads")
    fn = IntegerMaxPool(tuple(c.attr("kernel")), tuple(c.attr("strides")), (pads[0], pads[1]),
                        tuple(out.type.shape[1:3]))
    return _te(fn, inputs, out)


def _channels_last(g: Graph) -> tuple[set[str], list[_Addition]]:
    """The values to keep NHWC (see the module docstring) and the additions of the graph."""
    readers = _readers(g)
    adds = _additions(g, readers)
    pools = _pools(g)
    takes = {(i, 0) for i, c in enumerate(g.bindings) if _fn(c, IntegerConv)} | \
        {(i, 0) for i in pools}
    operands = {(a.add, k) for a in adds if a.back is None for k in (0, 1)}
    flat_of = {}
    for a in adds:         # a flat addition reads its operands through their reshapes
        if a.back is not None:
            for k in (0, 1):
                reshape = g.bindings[a.add].inputs[k].name
                flat_of[reshape] = (a.add, k)
    made = {c.outputs[0].name for c in g.bindings if _fn(c, IntegerConv) and
            _four_d(c.outputs[0])} | {a.out for a in adds} | {o for _, o in pools.values()}

    def reader_ok(value: str, at: tuple[int, int]) -> bool:
        if at in takes or at in operands:
            return True
        if at[0] < 0:
            return False
        b = g.bindings[at[0]]
        return b.op is Op.RESHAPE and flat_of.get(b.outputs[0].name) is not None
    keep = {v for v in made if readers.get(v) and all(reader_ok(v, at) for at in readers[v])}
    groups = [{a.a, a.b, a.out} for a in adds] + [set(p) for p in pools.values()]
    changed = True
    while changed:         # an addition's or a pool's operands and result share one layout
        changed = False
        for group in groups:
            if not group <= keep and group & keep:
                keep -= group
                changed = True
    return keep, adds


def _nhwc(v: Value) -> Value:
    n, c, h, w = v.type.shape
    return Value(v.name, TensorType((n, h, w, c), v.type.dtype))


def _te(fn, inputs: tuple[Value, ...], out: Value) -> Call:
    result = call_te(fn, inputs)
    digest = hashlib.sha256(str(result.to_program()).encode()).hexdigest()[:16]
    return Call((out,), Op.TE, inputs, (("fn", fn), ("program", digest)))


def channels_last_int8(g: Graph) -> Graph:
    """The graph with its 8-bit activations between integer layers in NHWC (see the module
    docstring); the model's inputs and outputs keep their layouts.

    >>> import numpy as np, polyloop as pl
    >>> from polyloop.graph.integer import Epilogue, IntegerConv
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", (1, 8, 6, 6), "uint8")
    >>> w = b.constant(np.ones((8, 8, 1, 1), "int8"))
    >>> conv = IntegerConv(Epilogue(out_dtype="uint8", scale=0.1))
    >>> g = channels_last_int8(b.build(b.emit_te(conv, b.emit_te(conv, x, w), w)))
    >>> [(c.attr("fn").in_layout, c.attr("fn").out_layout) for c in g.bindings]
    [('NCHW', 'NHWC'), ('NHWC', 'NCHW')]
    """
    keep, adds = _channels_last(g)
    if not keep:
        return g
    backs = {a.back for a in adds if a.back is not None and a.out in keep}
    pools = {i for i, (_, out) in _pools(g).items() if out in keep}
    direct = {a.add for a in adds if a.back is None and a.out in keep}
    bindings = []
    for i, c in enumerate(g.bindings):
        inputs = tuple(_nhwc(v) if v.name in keep else v for v in c.inputs)
        if _fn(c, IntegerConv):
            fn = dataclasses.replace(c.attr("fn"), in_layout="NHWC" if c.inputs[0].name in keep
                                     else "NCHW")
            out = c.outputs[0]
            if out.name in keep:
                fn, out = dataclasses.replace(fn, out_layout="NHWC"), _nhwc(out)
            c = _te(fn, inputs, out) if fn != c.attr("fn") else c
        elif i in pools:
            c = _pool(c, inputs)
        elif i in direct:
            c = _te(c.attr("fn"), inputs, _nhwc(c.outputs[0]))
        elif i in backs:
            out = _nhwc(c.outputs[0])
            attrs = tuple((k, out.type.shape if k == "shape" else v) for k, v in c.attrs)
            c = Call((out,), c.op, inputs, attrs)
        elif inputs != c.inputs:
            c = dataclasses.replace(c, inputs=inputs)
        bindings.append(c)
    return g.replace(bindings=tuple(bindings))


__all__ = ["channels_last_int8"]
