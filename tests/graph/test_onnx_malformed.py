# SPDX-License-Identifier: Apache-2.0
"""Malformed ONNX models are refused at import with a ``PolyloopError`` that names the node
or value at fault: nothing invalid runs, no foreign exception escapes."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

onnx = pytest.importorskip("onnx", reason="the ONNX importer needs onnx (extra 'graph')")
from onnx import TensorProto, helper  # noqa: E402

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def relu(src, dst, name=None):
    return helper.make_node("Relu", [src], [dst], name=name or f"relu_{dst}")


MALFORMED = {
    "missing initializer": (model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                  [vi("x", [2])], [vi("y", [2])]), ["add", "w"]),
    "cycle": (model([relu("b", "a", "first"), relu("a", "b", "second"), relu("b", "y")],
                    [vi("x", [2])], [vi("y", [2])]), ["first"]),
    "empty graph": (model([], [], []), ["empty"]),
    "two producers": (model([relu("x", "y", "one"), relu("x", "y", "two")], [vi("x", [2])],
                            [vi("y", [2])]), ["y"]),
    "transpose repeated axis": (model([helper.make_node("Transpose", ["x"], ["y"], name="tr",
                                                        perm=[0, 0, 1])],
                                      [vi("x", [2, 3, 4])], [vi("y", [2, 2, 3])]),
                                ["perm"]),
    "reshape not dividing": (model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
                                   [vi("x", [2, 3])], [vi("y", [4, -1])],
                                   [helper.make_tensor("s", TensorProto.INT64, [2], [4, -1])]),
                             ["rs", "reshape"]),
    "softmax axis out of range": (model([helper.make_node("Softmax", ["x"], ["y"], name="sm",
                                                          axis=9)],
                                        [vi("x", [1, 2, 3, 4])], [vi("y", [1, 2, 3, 4])]),
                                  ["sm"]),
    "input dimension 2^62": (model([relu("x", "y")], [vi("x", [2 ** 62])], [vi("y", [2 ** 62])]),
                             ["'x'", "address space"]),
    "unknown element type": (model([relu("x", "y")], [vi("x", [2], TensorProto.STRING)],
                                   [vi("y", [2], TensorProto.STRING)]), ["x"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_model_is_refused_naming_the_culprit(case):
    m, words = MALFORMED[case]
    with pytest.raises(pl.PolyloopError) as err:
        pl.graph.from_onnx(m)
    message = str(err.value)
    assert all(w.lower() in message.lower() for w in words), message


def test_zero_size_values_are_known_constants_and_never_reach_a_kernel():
    m = model([relu("x", "y", "r")], [vi("x", [0, 3])], [vi("y", [0, 3])])
    ex = pl.graph.build(pl.graph.from_onnx(m))     # nothing to compute: an empty result
    assert ex().shape == (0, 3)
    m = model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
              [vi("a", [2, 0]), vi("b", [0, 3])], [vi("y", [2, 3])])
    with pytest.raises(pl.PolyloopError, match="zero-size"):
        pl.graph.from_onnx(m)


def test_an_attribute_no_converter_reads_is_refused_by_name():
    node = helper.make_node("Relu", ["x"], ["y"], name="r", not_an_attribute=3)
    m = model([node], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(pl.PolyloopError, match="not_an_attribute"):
        pl.graph.from_onnx(m)


def test_a_computed_shape_input_is_refused_with_the_reason():
    nodes = [helper.make_node("Abs", ["s"], ["a"]),
             helper.make_node("Reshape", ["x", "a"], ["y"], name="rs")]
    m = model(nodes, [vi("x", [2, 3]), vi("s", [2], TensorProto.INT64)], [vi("y", [3, 2])])
    with pytest.raises(pl.graph.onnx_import.ValueNeeded, match="graph input") as err:
        pl.graph.from_onnx(m)
    assert err.value.names == ("s",)
    g = pl.graph.from_onnx(m, values={"s": np.array([3, -2], "int64")})
    assert g.outputs[0].type.shape == (3, 2) and [v.name for v in g.inputs] == ["x"]


def test_gather_indices_given_at_run_time_are_checked():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    m = model([node], [vi("x", [2, 3]), vi("i", [2], TensorProto.INT64)], [vi("y", [2, 2])])
    ex = pl.graph.build(pl.graph.from_onnx(m))
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(ex(x, np.array([-1, 0], "int64")), x[:, [2, 0]])
    with pytest.raises(pl.ArgumentError, match=r"gather indices must be in \[-3, 3\)"):
        ex(x, np.array([0, 3], "int64"))
