# SPDX-License-Identifier: Apache-2.0
"""Shape subgraphs of ONNX models over a symbolic batch and sequence length: products of
sizes (``batch*seq``) and differences (``seq - 1``) become derived size parameters, ``Range``
and ``Slice`` up to a size run as gathers, sizes used as data are counted at run time;
comparisons that depend on the sizes' values are refused. Compared with ONNX Runtime at
several sizes of one build, outputs poisoned."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (extra 'graph')")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (extra 'test')")

from onnx import TensorProto, helper  # noqa: E402

import polyloop as pl  # noqa: E402

SIZES = ((1, 5), (3, 11), (2, 3))
INT_MAX = np.iinfo(np.int64).max


def _c(name: str, values, dtype="int64"):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(
        np.array(values, dtype), name))


def _model(nodes, outputs, w=None):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [None] * 3) for o in outputs]
    inits = [onnx.numpy_helper.from_array(w, "w")] if w is not None else []
    return helper.make_model(helper.make_graph(nodes, "shapes", [x], outs, inits),
                             opset_imports=[helper.make_opsetid("", 17)])


def _sizes():
    """Shape -> batch, seq (0-d) and their 1-D forms."""
    return [helper.make_node("Shape", ["x"], ["s"]), _c("i0", 0), _c("i1", 1), _c("ax", [0]),
            helper.make_node("Gather", ["s", "i0"], ["b"]),
            helper.make_node("Gather", ["s", "i1"], ["q"]),
            helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
            helper.make_node("Unsqueeze", ["q", "ax"], ["q1"])]


def _check(model):
    g = pl.graph.from_onnx(model)
    ex = pl.graph.build(g)
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch, seq in SIZES:
        x = rng.standard_normal((batch, seq, 4)).astype("float32")
        want = session.run(None, {"x": x})
        sizes = {"batch": batch, "seq": seq}
        for rule in g.size_rules:
            if rule.terms:
                sizes[rule.name] = rule.value(sizes)
        outs = tuple(np.full(v.type.concrete(sizes), np.nan, "float32") for v in g.outputs)
        ex(x, out=outs)
        for got, w in zip(outs, want):
            assert got.shape == w.shape
            np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    return g, ex


def test_rows_of_batch_times_seq_become_a_derived_size():
    """x.reshape(batch*seq, 4) @ w, reshaped back to (batch, seq, 3); the product is written
    with Mul of two sizes, the way exporters write it. ``seq - 3``, computed on the way but
    the size of no tensor, does not restrict seq (seq = 3 runs)."""
    w = np.random.default_rng(1).standard_normal((4, 3)).astype("float32")
    nodes = _sizes() + [
        helper.make_node("Mul", ["b1", "q1"], ["rows"]), _c("four", [4]), _c("three", [3]),
        helper.make_node("Concat", ["rows", "four"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["y"]),
        helper.make_node("Sub", ["q1", "three"], ["q_less"]),       # seq - 3: no shape
        helper.make_node("Add", ["q_less", "three"], ["q_again"]),  # uses it, no range
        helper.make_node("Concat", ["b1", "q_again", "three"], ["back"], axis=0),
        helper.make_node("Reshape", ["y", "back"], ["out"])]
    g, _ = _check(_model(nodes, ["out"], w))
    assert [r.terms for r in g.size_rules if r.terms] == [((1, ("batch", "seq")),)]


def test_slice_and_range_up_to_a_size():
    """x[:, 1:] (seq - 1 positions) plus the positions 1..seq-1 counted by a Range from 1
    to seq, times seq and over the element count read as data at run time; and x[:, :3]
    (seq must be at least 3)."""
    nodes = _sizes() + [
        _c("one", [1]), _c("end", [INT_MAX]), _c("axis1", [1]), _c("start", 1), _c("step", 1),
        helper.make_node("Slice", ["x", "one", "end", "axis1"], ["tail"]),
        helper.make_node("Range", ["start", "q", "step"], ["pos"]),
        helper.make_node("Cast", ["pos"], ["posf"], to=TensorProto.FLOAT),
        _c("ax1", [1]),
        helper.make_node("Unsqueeze", ["posf", "ax1"], ["pos2"]),
        helper.make_node("Add", ["tail", "pos2"], ["shifted"]),
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["shifted", "qf"], ["scaled"]),
        helper.make_node("Size", ["x"], ["count"]),                 # 4*batch*seq, as data
        helper.make_node("Cast", ["count"], ["countf"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["scaled", "countf"], ["out"]),
        _c("three", [3]), helper.make_node("Slice", ["x", "ax", "three", "axis1"], ["head"])]
    g, ex = _check(_model(nodes, ["out", "head"]))
    x = np.zeros((2, 2, 4), "float32")
    with pytest.raises(pl.ArgumentError, match="seq"):     # the first 3 of seq: seq >= 3
        ex(x)


@pytest.mark.parametrize("op, message", [("Equal", "depends on the sizes"),
                                         ("Div", "not a whole number")])
def test_shape_arithmetic_that_depends_on_the_sizes_values_is_refused(op, message):
    nodes = _sizes() + [_c("k", [3]), helper.make_node(op, ["q1", "k"], ["r"])]
    if op == "Equal":
        nodes += [_c("a", [2]), helper.make_node("Where", ["r", "a", "q1"], ["sh"])]
    else:
        nodes += [helper.make_node("Identity", ["r"], ["sh"])]
    nodes += [_c("rest", [-1]), helper.make_node("Concat", ["sh", "rest"], ["target"], axis=0),
              helper.make_node("Reshape", ["x", "target"], ["out"])]
    with pytest.raises(pl.PolyloopError, match=message):
        pl.graph.from_onnx(_model(nodes, ["out"]))
