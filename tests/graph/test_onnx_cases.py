# SPDX-License-Identifier: Apache-2.0
"""A slice of ONNX's own conformance cases through ``polyloop.graph.onnx_backend``: a few per
operator family (the whole set: ``benchmarks/onnx_conformance.py``), each equal to the
expected outputs at the case's tolerance, with the expected dtype and shape.

Only the generator modules of the chosen operators are imported (generating every case
takes tens of seconds); ``POLYLOOP_ONNX_BACKEND_TEST=1`` also runs ONNX's ``BackendTest``
itself on this slice."""
from __future__ import annotations

import glob
import importlib
import os
import warnings

import numpy as np
import pytest

import polyloop as pl
from polyloop.config import CONFIG

onnx = pytest.importorskip("onnx", reason="the ONNX cases need onnx (extra 'graph')")
from polyloop.graph.onnx_backend import PolyloopBackend  # noqa: E402

# generator module -> case names (each module builds its cases when imported)
NODE_CASES = {
    "asin": ["test_asin"], "mod": ["test_mod_mixed_sign_int64"],
    "pow": ["test_pow_types_float32_int64"], "where": ["test_where_long_example"],
    "clip": ["test_clip_default_int8_min_expanded"],
    "reduce_log_sum_exp": ["test_reduce_log_sum_exp_do_not_keepdims_random"],
    "argmax": ["test_argmax_negative_axis_keepdims_example_select_last_index"],
    "cumsum": ["test_cumsum_2d_negative_axis"], "slice": ["test_slice_neg_steps"],
    "pad": ["test_edge_pad"], "expand": ["test_expand_dim_changed"],
    "gather": ["test_gather_negative_indices"], "onehot": ["test_onehot_with_axis"],
    "trilu": ["test_tril_neg"], "depthtospace": ["test_depthtospace_crd_mode_example"],
    "flatten": ["test_flatten_negative_axis1"], "split": ["test_split_variable_parts_1d_opset18"],
    "conv": ["test_conv_with_autopad_same"], "convtranspose": ["test_convtranspose_pads"],
    "gemm": ["test_gemm_all_attributes"], "einsum": ["test_einsum_batch_diagonal"],
    "groupnormalization": ["test_group_normalization_example"],
    "layernormalization": ["test_layer_normalization_3d_axis1_epsilon"],
    "hardmax": ["test_hardmax_one_hot"], "softmax": ["test_softmax_axis_0"],
    "gridsample": ["test_gridsample_bicubic"], "scatternd": ["test_scatternd_add"],
    "affinegrid": ["test_affine_grid_2d"], "rmsnormalization": ["test_rms_normalization_2d_axis0"],
    "mish": ["test_mish_expanded"], "scan": ["test_scan9_sum"],
    "topk": ["test_top_k_negative_axis"], "rnn": ["test_simple_rnn_defaults"],
}
# on-disk models of the onnx package (older exporters: opset 6 to 9 PyTorch graphs)
DISK_CASES = ["pytorch-converted/test_MaxPool1d_stride_padding_dilation",
              "pytorch-converted/test_AvgPool3d_stride", "pytorch-operator/test_operator_chunk",
              "pytorch-converted/test_PixelShuffle", "simple/test_expand_shape_model1"]


def _node_cases() -> dict:
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    from onnx.backend.test.case import node
    for module in NODE_CASES:
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    return {c.name: c for c in node._NodeTestCases}


def _disk_case(path: str):
    import onnx.backend.test
    from onnx import numpy_helper
    root = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", path)
    model = onnx.load(os.path.join(root, "model.onnx"))

    def read(prefix):
        files = sorted(glob.glob(os.path.join(root, "test_data_set_0", f"{prefix}_*.pb")))
        out = []
        for f in files:
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            out.append(numpy_helper.to_array(t))
        return out
    return model, read("input"), read("output")


def assert_outputs(got, want, rtol=1e-3, atol=1e-7) -> None:
    got = list(got)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


CASES = _node_cases()


@pytest.mark.parametrize("name", [n for names in NODE_CASES.values() for n in names])
def test_node_case_passes(name):
    case = CASES[name]
    inputs, outputs = case.data_sets[0]
    rep = PolyloopBackend.prepare(case.model)
    assert_outputs(rep.run([np.asarray(a) for a in inputs]), outputs, case.rtol, case.atol)


@pytest.mark.parametrize("path", DISK_CASES)
def test_disk_case_passes(path):
    model, inputs, outputs = _disk_case(path)
    assert_outputs(PolyloopBackend.run_model(model, inputs), outputs)


def test_a_shape_input_is_bound_at_the_first_run_and_per_value():
    case = CASES["test_slice_neg_steps"]
    inputs, outputs = case.data_sets[0]
    rep = PolyloopBackend.prepare(case.model)
    assert_outputs(rep.run(inputs), outputs)
    assert sorted(rep.bound) == ["axes", "ends", "starts", "steps"]
    # other bounds, the same (declared) output shape: compiled again for them
    other = [inputs[0], np.array([18, 9, 4], "int64"), np.array([-21, 0, 1], "int64"),
             inputs[3], inputs[4]]
    np.testing.assert_array_equal(rep.run(other)[0], inputs[0][18::-1, 9:0:-3, 4:1:-2])


def test_run_node_and_device():
    node = onnx.helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5)
    x = np.array([-2.0, 3.0], "float32")
    np.testing.assert_array_equal(PolyloopBackend.run_node(node, [x])[0], [-1.0, 3.0])
    assert PolyloopBackend.supports_device("CPU") and not PolyloopBackend.supports_device("CUDA")
    with pytest.raises(pl.PolyloopError, match="runs on the CPU"):
        PolyloopBackend.prepare(CASES["test_asin"].model, "CUDA")


@pytest.mark.skipif(not CONFIG.onnx_backend_test,
                    reason="POLYLOOP_ONNX_BACKEND_TEST=1 runs ONNX's BackendTest (it generates "
                    "every node case first: tens of seconds)")
def test_onnx_backend_test_runs_polyloop():
    import unittest
    import onnx.backend.test
    bt = onnx.backend.test.BackendTest(PolyloopBackend, __name__)
    for name in [n for names in NODE_CASES.values() for n in names]:
        bt.include(f"^{name}_cpu$")
    for path in DISK_CASES:
        bt.include(f"^{path.split('/')[1]}_cpu$")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    assert result.wasSuccessful() and result.testsRun >= len(DISK_CASES)


def test_shape_arithmetic_keeps_a_symbolic_batch():
    from onnx import TensorProto, helper
    h = helper
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             h.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
             h.make_node("Concat", ["b1", "minus_one"], ["target"], axis=0),
             h.make_node("Reshape", ["x", "target"], ["flat"]),
             h.make_node("Relu", ["flat"], ["y"])]
    inits = [h.make_tensor("zero", TensorProto.INT64, [], [0]),
             h.make_tensor("axes", TensorProto.INT64, [1], [0]),
             h.make_tensor("minus_one", TensorProto.INT64, [1], [-1])]
    graph = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                   ["N", 3, 4])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])], inits)
    g = pl.graph.from_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
    assert g.params == ("N",) and g.outputs[0].type.shape == ("N", 12)
    ex = pl.graph.build(g)
    for n in (2, 5):
        x = np.random.default_rng(n).standard_normal((n, 3, 4)).astype("float32")
        np.testing.assert_array_equal(ex(x), np.maximum(x.reshape(n, 12), 0))
