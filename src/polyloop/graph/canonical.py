# SPDX-License-Identifier: Apache-2.0
"""A kernel call with its values renamed by position: two layers that compute the same thing on
different values (a model's repeated blocks) give the same program, so they share one compiled
function, one tuning task and the tuning database's records.

>>> import numpy as np, polyloop as pl
>>> b = pl.graph.GraphBuilder("m"); x = b.input("x", (4, 8)); Op = pl.graph.Op
>>> y = b.emit(Op.RELU, b.emit(Op.TANH, b.emit(Op.RELU, x)))
>>> kc = pl.graph.passes.fuse_operators(b.build(y)).bindings[0]
>>> c = canonical_call(kc)
>>> [v.name for v in c.inputs], [v.name for v in c.outputs], c.kernel.name
(['p0'], ['r0'], 'kernel')
>>> [str(call.op) for call in c.kernel.body] == [str(call.op) for call in kc.kernel.body]
True
"""
from __future__ import annotations

from .ir import Call, Kernel, KernelCall, Value

#: the name of every canonical kernel (and so of its program)
NAME = "kernel"


def canonical_call(kc: KernelCall) -> KernelCall:
    """``kc`` with the kernel's parameters named ``p0, p1, ...``, its results ``r0, ...`` and
    the values made inside it ``v0, ...`` in order of definition (the call's inputs and
    outputs renamed alike), the kernel named ``kernel``. Types, operators and attributes are
    kept, so its program differs from another's exactly when the computation does."""
    k = kc.kernel
    names: dict[str, str] = {}
    for i, v in enumerate(k.params):
        names.setdefault(v.name, f"p{i}")
    for i, v in enumerate(k.results):
        names.setdefault(v.name, f"r{i}")
    count = 0
    for call in k.body:
        for v in call.outputs:
            if v.name not in names:
                names[v.name] = f"v{count}"
                count += 1

    def rename(v: Value) -> Value:
        return Value(names.get(v.name, v.name), v.type)

    def values(vs: tuple[Value, ...]) -> tuple[Value, ...]:
        return tuple(rename(v) for v in vs)
    body = tuple(Call(values(c.outputs), c.op, values(c.inputs), c.attrs) for c in k.body)
    kernel = Kernel(NAME, values(k.params), values(k.results), body)
    params = tuple(Value(names[p.name], a.type) for p, a in zip(k.params, kc.inputs))
    results = tuple(Value(names[r.name], a.type) for r, a in zip(k.results, kc.outputs))
    return KernelCall(results, kernel, params)
