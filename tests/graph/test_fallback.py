# SPDX-License-Identifier: Apache-2.0
"""Imported calls with no lowering: refused all at once by default, or run through a reference
implementation inside the executor with ``build(fallback=...)``, never silently."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the PyTorch importer needs torch (extra 'graph')")

from .test_from_torch import run_poisoned  # noqa: E402


class SortThenScale(torch.nn.Module):
    """A compiled linear layer, a call with no lowering (sort, two results), compiled math."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(5, 6)

    def forward(self, x):
        y = torch.relu(self.fc(x))
        values, indices = torch.sort(y, dim=1)
        return values * 2.0 + torch.special.i0(y), indices


def test_import_keeps_unsupported_calls_as_typed_foreign_nodes():
    g = pl.graph.from_torch(SortThenScale().eval(), (torch.randn(3, 5),))
    foreign = [b for b in g.bindings if getattr(b, "op", None) is pl.graph.Op.FOREIGN]
    assert [b.attr("op") for b in foreign] == ["aten.sort.default", "aten.i0.default"]
    assert [str(v.type) for v in foreign[0].outputs] == ["float32[3, 6]", "int64[3, 6]"]
    assert "foreign(%relu" in str(g)


def test_torch_fallback_runs_inside_the_executor_and_is_reported(capsys):
    torch.manual_seed(0)
    model = SortThenScale().eval()
    x = torch.randn(3, 5)
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)), fallback="torch")
    assert "2 operator call(s) run through the torch fallback" in capsys.readouterr().err
    got_values, got_indices = run_poisoned(ex, x.numpy())
    with torch.no_grad():
        values, indices = model(x)
    np.testing.assert_allclose(got_values, values.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_indices, indices.numpy())
    report = ex.report()
    assert "fallback  %sort, %sort_1 = aten.sort.default via torch" in report
    assert "2 fallback call(s)" in report and "kernel    model_k0_linear" in report


def test_numpy_fallback_runs_the_numpy_references():
    torch.manual_seed(1)
    model = SortThenScale().eval()
    x = torch.randn(4, 5)
    x[0, :] = 0.0                     # ties: kept in input order, as PyTorch's stable sort
    ex = pl.graph.build(pl.graph.from_torch(model, (x,)), fallback="numpy")
    got_values, got_indices = run_poisoned(ex, x.numpy())
    with torch.no_grad():
        values, indices = model(x)
    np.testing.assert_allclose(got_values, values.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_indices, indices.numpy())
    assert "via numpy" in ex.report()


class Rearranged(torch.nn.Module):
    def forward(self, x):
        top = torch.topk(x, 3, dim=1)
        sort = torch.sort(torch.nan_to_num(x, nan=0.0) * 0.0 + x, dim=0, descending=True)
        return (top.values, torch.flip(x, (0, 2)), torch.roll(x, (1, -2), (1, 2)),
                torch.cumprod(x, 2), sort.values, sort.indices)


def test_numpy_references_equal_pytorch_with_nan_and_ties():
    x = torch.randn(3, 6, 4)
    x[1, 2, 0] = float("nan")
    x[2, :, 1] = 0.5
    ex = pl.graph.build(pl.graph.from_torch(Rearranged(), (x,)), fallback="numpy")
    with torch.no_grad():
        want = Rearranged()(x)
    for got, w in zip(ex(x.numpy()), want):    # NaN in, NaN out: not poisoned
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)


class Digamma(torch.nn.Module):
    def forward(self, x):
        return torch.digamma(x.abs() + 1.0)


def test_a_fallback_without_that_reference_is_refused_by_name():
    g = pl.graph.from_torch(Digamma(), (torch.randn(3, 5),))
    with pytest.raises(pl.PolyloopError, match="no numpy reference: try fallback='torch'"):
        pl.graph.build(g, fallback="numpy")
    with pytest.raises(pl.PolyloopError, match="use one of 'error', 'torch', 'numpy'"):
        pl.graph.build(g, fallback="python")


def _roi_align_model():
    """A compiled Relu, RoiAlign (no converter: ONNX's reference runs it), a compiled Mul."""
    onnx = pytest.importorskip("onnx", reason="needs onnx (extra 'graph')")
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("RoiAlign", ["r", "rois", "idx"], ["a"], output_height=3,
                              output_width=2, sampling_ratio=2, spatial_scale=0.5,
                              name="align"),
             helper.make_node("Mul", ["a", "a"], ["y"])]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "roi", [helper.make_tensor_value_info("x", f, [2, 3, 9, 7]),
                       helper.make_tensor_value_info("rois", f, [4, 4]),
                       helper.make_tensor_value_info("idx", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", f, [4, 3, 3, 2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])


def test_onnx_operator_without_converter_runs_through_onnx_numpy_reference(capsys):
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (extra 'test')")
    model = _roi_align_model()
    g = pl.graph.from_onnx(model)
    with pytest.raises(pl.PolyloopError, match=r"(?s)1 unsupported.*onnx.RoiAlign"):
        pl.graph.build(g)
    with pytest.raises(pl.PolyloopError, match="no torch reference: try fallback='numpy'"):
        pl.graph.build(g, fallback="torch")
    ex = pl.graph.build(g, fallback="numpy")
    assert "run through the numpy fallback: %a = onnx.RoiAlign" in capsys.readouterr().err
    assert "fallback  %a = onnx.RoiAlign via numpy" in ex.report()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = rng.standard_normal((2, 3, 9, 7)).astype("float32")
        rois = np.sort(rng.uniform(0, 12, (4, 2, 2)), axis=1).reshape(4, 4)[:, [0, 2, 1, 3]]
        rois = rois.astype("float32")
        idx = rng.integers(0, 2, 4).astype("int64")
        out = np.full((4, 3, 3, 2), np.nan, "float32")
        ex(x, rois, idx, out=(out,))
        want = session.run(None, {"x": x, "rois": rois, "idx": idx})[0]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
