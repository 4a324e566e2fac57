# SPDX-License-Identifier: Apache-2.0
"""Normalisation, reductions and data movement as tensor expressions."""
from __future__ import annotations

from ...frontend import te
from ...ir.elementwise import sqrt, where
from .nn import const_int


def layer_norm(inputs, attrs, shape, name):
    """Normalise over the last ``ndims`` axes, then scale by gamma and shift by beta."""
    x, gamma, beta = inputs
    nd = attrs.get("ndims", 1)
    eps = float(attrs.get("eps", 1e-5))
    lead = len(shape) - nd
    count = 1
    for d in shape[lead:]:
        count *= const_int(d, "a normalised axis")
    axes_a = [te.reduce_axis((0, d), name=f"rm{k}") for k, d in enumerate(shape[lead:])]
    mean = te.compute(shape[:lead], lambda *i: te.sum(x[i + tuple(axes_a)], axis=axes_a),
                      name=f"{name}_mean")
    axes_b = [te.reduce_axis((0, d), name=f"rv{k}") for k, d in enumerate(shape[lead:])]

    def centred(i, r):
        return x[i + tuple(r)] - mean[i] * (1.0 / count)
    var = te.compute(shape[:lead], lambda *i: te.sum(centred(i, axes_b) * centred(i, axes_b),
                                                     axis=axes_b), name=f"{name}_var")
    return te.compute(shape, lambda *i: (x[i] - mean[i[:lead]] * (1.0 / count))
                      / sqrt(var[i[:lead]] * (1.0 / count) + eps)
                      * gamma[i[lead:]] + beta[i[lead:]], name=name)


def mean(inputs, attrs, shape, name):
    x = inputs[0]
    axes = sorted(a % x.ndim for a in attrs["axes"])
    keep = attrs.get("keepdim", False)
    count = 1
    for a in axes:
        count *= const_int(x.shape[a], "a reduced axis")
    red = {a: te.reduce_axis((0, x.shape[a]), name=f"rm{a}") for a in axes}

    def index(i):
        out, it = [], iter(i)
        for a in range(x.ndim):
            if a in red:
                out.append(red[a])
                if keep:
                    next(it)
            else:
                out.append(next(it))
        return tuple(out)
    total = te.compute(shape, lambda *i: te.sum(x[index(i)], axis=list(red.values())),
                       name=f"{name}_sum")
    return te.compute(shape, lambda *i: total[i] * (1.0 / count), name=name)


def permute(inputs, attrs, shape, name):
    x = inputs[0]
    axes = attrs["axes"]
    inverse = [axes.index(k) for k in range(len(axes))]
    return te.compute(shape, lambda *i: x[tuple(i[inverse[k]] for k in range(len(axes)))],
                      name=name)


def concat(inputs, attrs, shape, name):
    axis = attrs["axis"] % len(shape)
    starts, pos = [], 0
    for t in inputs:
        starts.append(pos)
        pos += const_int(t.shape[axis], "a concatenated axis")

    def body(*i):
        def read(t, start):
            return t[i[:axis] + (i[axis] - start,) + i[axis + 1:]]
        expr = read(inputs[-1], starts[-1])
        for k in range(len(inputs) - 2, -1, -1):
            expr = where(i[axis] < starts[k + 1], read(inputs[k], starts[k]), expr)
        return expr
    return te.compute(shape, body, name=name)


def embedding(inputs, attrs, shape, name):
    """``out[..., j] = weight[idx[...], j]`` (indices are checked by the executor)."""
    weight, idx = inputs
    return te.compute(shape, lambda *i: weight[idx[i[:-1]], i[-1]], name=name)


def select(inputs, attrs, shape, name):
    x = inputs[0]
    axis, index = attrs["axis"] % x.ndim, attrs["index"]
    return te.compute(shape, lambda *i: x[i[:axis] + (index,) + i[axis:]], name=name)


TENSOR = {"select": select, "layer_norm": layer_norm, "mean": mean, "permute": permute, "concat": concat,
          "embedding": embedding}
