# SPDX-License-Identifier: Apache-2.0
"""``Op.EINSUM`` as one tensor expression: the product of the operands' elements summed over
every subscript the result does not name (a repeated subscript reads a diagonal)."""
from __future__ import annotations

from ...frontend import te
from ..shapes_nn import parse_einsum


def lower_einsum(inputs, attrs, shape, name):
    e = parse_einsum(attrs["equation"], tuple(t.ndim for t in inputs))
    sizes = {}
    for term, t in zip(e.inputs, inputs):
        for ch, d in zip(term, t.shape):
            if ch != ".":
                sizes.setdefault(ch, d)
    width = e.output.count(".")
    start = e.output.find(".")
    summed = sorted(set("".join(e.inputs)) - set(e.output) - {"."})
    red = {ch: te.reduce_axis((0, sizes[ch]), name=f"r_{ch}") for ch in summed}

    def body(*i):
        env = dict(red)
        for ch, k in zip(e.output, i):
            if ch != ".":
                env[ch] = k
        ell = tuple(i[start:start + width]) if width else ()
        product = None
        for term, t in zip(e.inputs, inputs):
            dots = term.count(".")
            index, seen = [], 0
            for ch, d in zip(term, t.shape):
                if ch == ".":
                    k = ell[width - dots + seen]
                    seen += 1
                    index.append(0 if str(d) == "1" else k)
                else:
                    index.append(env[ch])
            v = t[tuple(index)]
            product = v if product is None else product * v
        return te.sum(product, axis=list(red.values())) if red else product
    return te.compute(shape, body, name=name)


EINSUM = {"einsum": lower_einsum}
