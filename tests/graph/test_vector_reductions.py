# SPDX-License-Identifier: Apache-2.0
"""Reductions along contiguous memory (global pooling, a layer norm or softmax over a long row,
a mean over the two last axes) run as vectors of partial results: the schedule has a partial
block whose inner loop is vectorized, and the values equal PyTorch's at odd sizes, with a
symbolic batch and NaN-poisoned outputs. A reduction along a strided axis keeps the rule that
vectorizes over its outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.build import kernel_schedule
from polyloop.graph.schedule_reduce import contiguous_axes

torch = pytest.importorskip("torch", reason="the operators are checked against PyTorch")
F = torch.nn.functional
RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


@pytest.fixture(scope="module")
def model():
    """Global average and max pooling of n x 19 x 23 x 29, a mean over its two last axes, a
    layer norm and a softmax over rows of 301, a mean over a strided axis."""
    b = pl.graph.GraphBuilder("reductions")
    x = b.input("x", ("n", 19, 23, 29))
    rows = b.input("rows", ("n", 7, 301))
    gamma, beta = b.constant(rand(301), "gamma"), b.constant(rand(301), "beta")
    outs = [b.emit(Op.ADAPTIVE_AVG_POOL2D, x, output_size=(1, 1)),
            b.emit(Op.MAX_POOL2D, x, kernel=(23, 29), stride=(23, 29), padding=(0, 0)),
            b.emit(Op.MEAN, x, axes=(2, 3), keepdim=False),
            b.emit(Op.LAYER_NORM, rows, gamma, beta, eps=1e-5),
            b.emit(Op.SOFTMAX, rows, axis=-1),
            b.emit(Op.MEAN, rows, axes=(1,), keepdim=True)]
    return pl.graph.build(b.build(*outs))


def _references(x, rows, gamma, beta):
    tx, tr = torch.from_numpy(x), torch.from_numpy(rows)
    return [F.adaptive_avg_pool2d(tx, 1), F.max_pool2d(tx, (23, 29)), tx.mean((2, 3)),
            F.layer_norm(tr, (301,), torch.from_numpy(gamma), torch.from_numpy(beta)),
            F.softmax(tr, -1), tr.mean(1, keepdim=True)]


@pytest.mark.parametrize("batch", [1, 3])
def test_reductions_along_rows_equal_pytorch(model, batch):
    ex = model
    x, rows = rand(batch, 19, 23, 29), rand(batch, 7, 301)
    refs = [r.numpy() for r in _references(x, rows, _const(ex, "gamma"), _const(ex, "beta"))]
    outs = tuple(np.full(r.shape, np.nan, np.float32) for r in refs)
    ex(x, rows, out=outs)
    for out, ref in zip(outs, refs):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def _const(ex, name):
    return next(c.data for c in ex.graph.constants if c.value.name == name)


def test_contiguous_reductions_have_vector_partials_and_strided_ones_do_not(model):
    partial, plain = 0, 0
    for kc in model.graph.bindings:
        if not isinstance(kc, pl.graph.KernelCall):
            continue
        text = str(kernel_schedule(kc))
        ops = [str(c.op) for c in kc.kernel.body]
        if "_rf" in text:
            partial += 1
            assert "vectorized(" in text
        elif ops == ["mean"] and kc.inputs[0].type.shape[-1] == 301:
            plain += 1      # the mean over axis 1 reads along its outputs instead
            assert "vectorized(" in text
    # the two poolings, the mean over a plane, the layer norm and the softmax
    assert partial >= 5 and plain == 1


def test_contiguous_axes_counts_whole_trailing_rows():
    x = pl.placeholder((4, 6, 10), "float32", name="x")
    a, b = pl.reduce_axis((0, 6), name="a"), pl.reduce_axis((0, 10), name="b")
    whole = pl.compute((4,), lambda i: pl.sum(x[i, a, b], axis=[a, b]), name="whole")
    c = pl.reduce_axis((0, 5), name="c")
    part = pl.compute((4, 6), lambda i, j: pl.sum(x[i, j, 2 * c], axis=c), name="part")
    d = pl.reduce_axis((0, 4), name="d")
    strided = pl.compute((6, 10), lambda j, k: pl.sum(x[d, j, k], axis=d), name="strided")
    e = pl.reduce_axis((0, 6), name="e")
    f = pl.reduce_axis((0, 5), name="f")
    short = pl.compute((4,), lambda i: pl.sum(x[i, e, f], axis=[e, f]), name="short")
    assert [contiguous_axes(t) for t in (whole, part, strided, short)] == [2, 0, 0, 1]
