# SPDX-License-Identifier: Apache-2.0
"""``Op.NORMALIZE`` as tensor expressions: mean and variance (or mean square) over a set of
axes, then the scale and bias broadcast to the data."""
from __future__ import annotations

from ...frontend import te
from ...ir.elementwise import sqrt
from .elementwise import broadcast_index
from .reduce import count_of, reduced_index


def lower_normalize(inputs, attrs, shape, name):
    """``(x - mean) / sqrt(var + eps) * scale + bias`` over ``axes`` (``rms``: ``x /
    sqrt(mean(x^2) + eps) * scale + bias``)."""
    x = inputs[0]
    axes = sorted(a % x.ndim for a in attrs["axes"])
    eps = float(attrs.get("eps", 1e-5))
    rms = bool(attrs.get("rms", False))
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
    n = count_of([x.shape[a] for a in axes], str(x.dtype))

    def reduce_over(value, suffix: str):
        red = {a: te.reduce_axis((0, x.shape[a]), name=f"{suffix}{a}") for a in axes}
        total = te.compute(kept, lambda *i: te.sum(value(reduced_index(x.ndim, red, True, i), i),
                                                   axis=list(red.values())),
                           name=f"{name}_{suffix}_sum")
        return te.compute(kept, lambda *i: total[i] / n, name=f"{name}_{suffix}")

    def at(i):
        return tuple(0 if a in axes else k for a, k in enumerate(i))
    if rms:
        mean = None
        var = reduce_over(lambda j, i: x[j] * x[j], "ms")
    else:
        mean = reduce_over(lambda j, i: x[j], "mean")
        var = reduce_over(lambda j, i: (x[j] - mean[i]) * (x[j] - mean[i]), "var")
    inv = te.compute(kept, lambda *i: 1.0 / sqrt(var[i] + eps), name=f"{name}_inv")
    scale = inputs[1] if len(inputs) > 1 else None
    bias = inputs[2] if len(inputs) > 2 else None
    rank = len(shape)

    def body(*i):
        v = (x[i] if mean is None else x[i] - mean[at(i)]) * inv[at(i)]
        if scale is not None:
            v = v * scale[broadcast_index(scale, rank, i)]
        if bias is not None:
            v = v + bias[broadcast_index(bias, rank, i)]
        return v
    return te.compute(shape, body, name=name)


NORM = {"normalize": lower_normalize}
