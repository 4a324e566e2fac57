# SPDX-License-Identifier: Apache-2.0
"""Models imported from ONNX (exported from PyTorch here), equal to PyTorch."""
from __future__ import annotations

import io

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the ONNX models are exported from PyTorch")
onnx = pytest.importorskip("onnx", reason="the ONNX importer needs onnx (extra 'graph')")

from .models import SeedCNN  # noqa: E402


def export(model, x, path=None) -> object:
    f = io.BytesIO() if path is None else path
    torch.onnx.export(model, (x,), f, dynamo=False, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}})
    return onnx.load_from_string(f.getvalue()) if path is None else path


@pytest.fixture(scope="module")
def onnx_cnn(tmp_path_factory):
    """The seed CNN exported to an ONNX file with a symbolic batch (built once: the command
    line test then finds the model in the cache)."""
    torch.manual_seed(4)
    model = SeedCNN().eval()
    path = str(tmp_path_factory.mktemp("onnx") / "cnn.onnx")
    with pytest.warns(DeprecationWarning):
        export(model, torch.randn(2, 1, 28, 28), path)
    return model, path


def test_seed_cnn_from_onnx_at_two_batch_sizes(onnx_cnn):
    model, path = onnx_cnn
    g = pl.graph.from_onnx(path)
    assert g.params == ("batch",)
    ex = pl.graph.build(g)
    # conv + bias + relu + max-pool: one kernel, as from PyTorch
    first = next(b for b in ex.graph.bindings if isinstance(b, pl.graph.KernelCall))
    assert [str(c.op) for c in first.kernel.body] == ["conv2d", "add", "relu", "max_pool2d"]
    for batch in (4, 5):
        x = torch.randn(batch, 1, 28, 28)
        out = np.full((batch, 10), np.nan, "float32")
        ex(x.numpy(), out=(out,))
        with torch.no_grad():
            np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_onnx_unsupported_operators_are_listed():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("NonZero", ["x"], ["a"], name="s"),
             helper.make_node("Relu", ["x"], ["b"], name="r"),
             helper.make_node("Unique", ["b"], ["y"], name="c")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("a", TensorProto.INT64, [2, None])])
    with pytest.raises(pl.PolyloopError, match="2 unsupported") as e:
        pl.graph.from_onnx(helper.make_model(graph))
    assert "ONNX node 0 (NonZero 's')" in str(e.value)
    assert "ONNX node 2 (Unique 'c')" in str(e.value)


def test_command_line_compile_and_run(tmp_path, capsys, onnx_cnn):
    from polyloop.cli import main
    model, path = onnx_cnn
    x = torch.randn(2, 1, 28, 28)
    np.save(tmp_path / "x.npy", x.numpy())
    assert main(["compile", path, "-o", str(tmp_path / "cnn.so")]) == 0
    assert (tmp_path / "cnn.so").exists() and (tmp_path / "cnn.h").exists()
    assert main(["run", path, "--input", str(tmp_path / "x.npy"), "--output",
                 str(tmp_path / "y.npy"), "--benchmark"]) == 0
    assert "median time" in capsys.readouterr().out
    with torch.no_grad():
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), model(x).numpy(), rtol=1e-5,
                                   atol=1e-5)
    assert main(["run", path, "--input", str(tmp_path / "missing.npy")]) == 1
