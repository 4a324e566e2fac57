# SPDX-License-Identifier: Apache-2.0
"""Quantized ONNX models in integers: the operator forms (QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger, DynamicQuantizeLinear) and QDQ models written by ONNX Runtime's
quantization tool, against ONNX Runtime on the same model (within one quantization step of
the output; integer results exactly), with zero points other than 0, per-channel scales,
sizes that are not multiples of the tiles, a symbolic batch and poisoned outputs."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl

onnx = pytest.importorskip("onnx", reason="the quantized models need onnx (extra 'graph')")
ort = pytest.importorskip("onnxruntime", reason="the reference is ONNX Runtime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyloop.graph.integer import IntegerAdd, IntegerConv, IntegerMatmul  # noqa: E402
from polyloop.graph.ir import KernelCall, Op  # noqa: E402

RNG = np.random.default_rng(0)
TYPES = {"float32": TensorProto.FLOAT, "uint8": TensorProto.UINT8, "int8": TensorProto.INT8,
         "int32": TensorProto.INT32}


def _model(nodes, inputs, outputs, inits, opset=13):
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info(n, TYPES[t], s)
                                       for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, TYPES[t], [f"{n}{k}" for k in range(r)])
                           for n, t, r in outputs],
                          [numpy_helper.from_array(np.asarray(a), k) for k, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _poisoned(mod, *inputs):
    """Outputs with every element written: two runs on outputs filled with different values
    give the same result (NaN for float outputs)."""
    g = mod.graph
    sizes = {}
    for v, x in zip(g.inputs, inputs):
        sizes.update({d: n for d, n in zip(v.type.shape, x.shape) if isinstance(d, str)})
    runs = []
    for fill in (0, 1):
        outs = tuple(np.full(v.type.concrete(sizes), np.nan if v.type.dtype == "float32" else
                             (fill * 255 if v.type.dtype == "uint8" else fill * 77 - 3),
                             v.type.dtype) for v in g.outputs)
        mod(*inputs, out=outs)
        runs.append(outs)
    for a, b in zip(*runs):
        assert np.array_equal(a, b) and not (a.dtype.kind == "f" and np.isnan(a).any())
    return runs[0]


def _integer_kernels(g) -> list:
    return [c.attr("fn") for b in pl.graph.optimize(g).bindings if isinstance(b, KernelCall)
            for c in b.kernel.body if c.op is Op.TE
            and isinstance(c.attr("fn"), (IntegerAdd, IntegerConv, IntegerMatmul))]


def _within_one_step(got, want):
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1, diff.max()
    assert (diff == 0).mean() > 0.97      # a difference is a rare tie of the float rounding


@pytest.mark.parametrize("c_in,k_out,stride,pad,out", [(5, 7, 2, 1, "uint8"),
                                                       (3, 13, 1, 1, "int8"),
                                                       (9, 18, 1, 0, "uint8")])
def test_qlinear_conv(c_in, k_out, stride, pad, out):
    w = RNG.integers(-128, 128, (k_out, c_in, 3, 3)).astype(np.int8)
    inits = {"xs": np.float32(0.05), "xz": np.array(3, out), "w": w,
             "ws": RNG.uniform(0.001, 0.01, k_out).astype(np.float32),
             "wz": np.zeros(k_out, np.int8), "ys": np.float32(0.7),
             "yz": np.array(128 if out == "uint8" else -5, out),
             "b": RNG.integers(-3000, 3000, k_out).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], strides=[stride, stride], pads=[pad] * 4)
    m = _model([node], [("x", out, ["n", c_in, 11, 9])], [("y", out, 4)], inits)
    g = pl.graph.from_onnx(m)
    assert len(_integer_kernels(g)) == 1
    lo = np.iinfo(out).min
    x = RNG.integers(lo, lo + 256, (2, c_in, 11, 9)).astype(out)
    got = _poisoned(pl.graph.build(g), x)[0]
    _within_one_step(got, _ort(m, {"x": x})[0])


@pytest.mark.parametrize("a_shape,bias", [((5, 37), False), ((2, 3, 37), True)])
def test_qlinear_matmul(a_shape, bias):
    b = RNG.integers(-128, 128, (37, 19)).astype(np.int8)
    inits = {"as": np.float32(0.02), "az": np.uint8(131), "b": b, "bs": np.float32(0.003),
             "bz": np.int8(-4), "ys": np.float32(0.09), "yz": np.uint8(7)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    m = _model([node], [("a", "uint8", list(a_shape))], [("y", "uint8", len(a_shape))], inits)
    g = pl.graph.from_onnx(m)
    assert len(_integer_kernels(g)) == 1
    a = RNG.integers(0, 256, a_shape).astype(np.uint8)
    _within_one_step(_poisoned(pl.graph.build(g), a)[0], _ort(m, {"a": a})[0])


def test_integer_operators_exact():
    """MatMulInteger and ConvInteger with zero points as inputs of the model: ORT's int32
    results exactly."""
    b = RNG.integers(0, 256, (29, 6)).astype(np.uint8)
    w = RNG.integers(-128, 128, (6, 5, 2, 2)).astype(np.int8)
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"]),
             helper.make_node("ConvInteger", ["x", "w", "xz"], ["z"], pads=[1] * 4)]
    m = _model(nodes, [("a", "int8", ["n", 29]), ("az", "int8", []), ("x", "uint8", [1, 5, 6, 7]),
                       ("xz", "uint8", [])], [("y", "int32", 2), ("z", "int32", 4)],
               {"b": b, "bz": np.uint8(200), "w": w}, opset=10)
    a = RNG.integers(-128, 128, (3, 29)).astype(np.int8)
    x = RNG.integers(0, 256, (1, 5, 6, 7)).astype(np.uint8)
    feeds = {"a": a, "az": np.array(-9, np.int8), "x": x, "xz": np.array(77, np.uint8)}
    g = pl.graph.from_onnx(m)
    assert len(_integer_kernels(g)) == 2
    got = _poisoned(pl.graph.build(g), *feeds.values())
    for y, ref in zip(got, _ort(m, feeds)):
        np.testing.assert_array_equal(y, ref)


def test_dynamic_quantize_linear():
    m = _model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
               [("x", "float32", [4, 33])],
               [("y", "uint8", 2), ("s", "float32", 0), ("z", "uint8", 0)],
               {}, opset=11)
    x = (RNG.standard_normal((4, 33)) * 3 + 1).astype(np.float32)
    y, s, z = _poisoned(pl.graph.build(pl.graph.from_onnx(m)), x)
    ry, rs, rz = _ort(m, {"x": x})
    np.testing.assert_allclose(s, rs, rtol=1e-6)
    assert z == rz
    _within_one_step(y, ry)


def test_overflowing_reduction_is_refused():
    """A reduction the int32 sum cannot hold for every input is refused by name."""
    k = 70000
    m = _model([helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])],
               [("a", "uint8", [2, k])], [("y", "int32", 2)],
               {"b": np.ones((k, 3), np.int8), "az": np.uint8(1)}, opset=10)
    with pytest.raises(pl.PolyloopError, match="overflow the int32 sum"):
        pl.graph.from_onnx(m)


def _qdq_static(tmp_path, per_channel):
    torch = pytest.importorskip("torch")
    quant = pytest.importorskip("onnxruntime.quantization")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 13, 3, padding=1)
            self.c2 = torch.nn.Conv2d(13, 21, 3, stride=2, padding=1)
            self.fc = torch.nn.Linear(21 * 5 * 5, 10)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
            return self.fc(torch.flatten(torch.relu(self.c2(x)), 1))

    torch.manual_seed(0)
    src, dst = tmp_path / "cnn.onnx", tmp_path / "cnn_qdq.onnx"
    torch.onnx.export(Net().eval(), torch.randn(2, 3, 19, 19), str(src), input_names=["x"],
                      output_names=["y"], opset_version=13, dynamo=False,
                      dynamic_axes={"x": {0: "n"}})

    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": RNG.standard_normal((2, 3, 19, 19)).astype(np.float32)}
                            for _ in range(3)])

        def get_next(self):
            return next(self.it, None)

    quant.quantize_static(str(src), str(dst), Reader(), quant_format=quant.QuantFormat.QDQ,
                          per_channel=per_channel, activation_type=quant.QuantType.QUInt8,
                          weight_type=quant.QuantType.QInt8)
    return onnx.load(str(dst))


@pytest.mark.parametrize("per_channel", [False, True])
def test_ort_static_qdq_cnn(tmp_path, per_channel):
    """conv+relu+pool+conv+relu+gemm quantized by ONNX Runtime (QDQ): both convolutions and
    the Gemm run as int8 kernels; the output equals ORT's within one output step."""
    m = _qdq_static(tmp_path, per_channel)
    g = pl.graph.from_onnx(m)
    kinds = sorted(type(k).__name__ for k in _integer_kernels(g))
    assert kinds == ["IntegerConv", "IntegerConv", "IntegerMatmul"]
    x = RNG.standard_normal((3, 3, 19, 19)).astype(np.float32)
    step = [numpy_helper.to_array(i) for i in m.graph.initializer
            if i.name == m.graph.node[-1].input[1]][0]
    got = _poisoned(pl.graph.build(g), x)[0]
    np.testing.assert_allclose(got, _ort(m, {"x": x})[0], rtol=0, atol=float(step) * 1.001)


@pytest.mark.parametrize("per_channel", [False, True])
def test_ort_dynamic_matmul(tmp_path, per_channel):
    quant = pytest.importorskip("onnxruntime.quantization")
    inits = {"W1": RNG.standard_normal((37, 23)).astype(np.float32),
             "W2": RNG.standard_normal((23, 11)).astype(np.float32),
             "b2": RNG.standard_normal(11).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "W2"], ["m"]),
             helper.make_node("Add", ["m", "b2"], ["y"])]
    src, dst = tmp_path / "mlp.onnx", tmp_path / "mlp_dyn.onnx"
    onnx.save(_model(nodes, [("x", "float32", ["n", 5, 37])], [("y", "float32", 3)], inits), src)
    quant.quantize_dynamic(str(src), str(dst), weight_type=quant.QuantType.QInt8,
                           per_channel=per_channel)
    m = onnx.load(str(dst))
    g = pl.graph.from_onnx(m)
    assert len(_integer_kernels(g)) == 2
    x = RNG.standard_normal((3, 5, 37)).astype(np.float32)
    np.testing.assert_allclose(_poisoned(pl.graph.build(g), x)[0], _ort(m, {"x": x})[0],
                               rtol=1e-5, atol=1e-4)


def test_qdq_relu_and_layers_left_in_float():
    """Conv (a float32 bias) -> Relu -> QuantizeLinear folds (the bias rounded to int32 at the
    input scale times the weight scale, the Relu a max with the zero point); a grouped
    QDQ convolution is not an int8 recipe's and stays in float32: both equal ORT's result
    within one output step."""
    c, k = 6, 10
    inits = {"xs": np.float32(0.04), "xz": np.uint8(120), "ys": np.float32(0.3),
             "yz": np.uint8(20), "w1": RNG.integers(-128, 128, (k, c, 3, 3)).astype(np.int8),
             "w1s": RNG.uniform(0.002, 0.01, k).astype(np.float32), "w1z": np.zeros(k, np.int8),
             "w2": RNG.integers(-128, 128, (k, 5, 1, 1)).astype(np.int8),
             "w2s": np.float32(0.01), "w2z": np.int8(0),
             "b1": RNG.standard_normal(k).astype(np.float32)}
    def dq(i, s, z, o, **a):
        return helper.make_node("DequantizeLinear", [i, s, z], [o], **a)
    nodes = [dq("x", "xs", "xz", "xf"), dq("w1", "w1s", "w1z", "w1f", axis=0),
             helper.make_node("Conv", ["xf", "w1f", "b1"], ["c1"], pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("QuantizeLinear", ["r1", "ys", "yz"], ["q1"]),
             dq("q1", "ys", "yz", "h"), dq("w2", "w2s", "w2z", "w2f"),
             helper.make_node("Conv", ["h", "w2f"], ["c2"], group=2),
             helper.make_node("QuantizeLinear", ["c2", "ys", "yz"], ["y"])]
    m = _model(nodes, [("x", "uint8", ["n", c, 7, 9])], [("q1", "uint8", 4), ("y", "uint8", 4)],
               inits)
    g = pl.graph.from_onnx(m)
    assert [type(f).__name__ for f in _integer_kernels(g)] == ["IntegerConv"]
    x = RNG.integers(0, 256, (2, c, 7, 9)).astype(np.uint8)
    for got, want in zip(_poisoned(pl.graph.build(g), x), _ort(m, {"x": x})):
        _within_one_step(got, want)


def test_matmul_integer_four_axes():
    """A 4-D left operand by a constant matrix: rows merged, exactly ORT's int32 result."""
    b = RNG.integers(-128, 128, (7, 5)).astype(np.int8)
    m = _model([helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])],
               [("a", "uint8", [2, 3, 4, 7])], [("y", "int32", 4)],
               {"b": b, "az": np.uint8(9)}, opset=10)
    a = RNG.integers(0, 256, (2, 3, 4, 7)).astype(np.uint8)
    np.testing.assert_array_equal(_poisoned(pl.graph.build(pl.graph.from_onnx(m)), a)[0],
                                  _ort(m, {"a": a})[0])


def test_qdq_pool_and_additions_in_integers():
    """Between integer layers: DequantizeLinear -> MaxPool -> QuantizeLinear of the same scale
    runs on the uint8 tensor (no float operation left), additions of two dequantized tensors
    (one through a Relu, one broadcast: in float32) equal ORT's within one output step."""
    c = 5
    inits = {"as": np.float32(0.05), "az": np.uint8(100), "bs": np.float32(0.03),
             "bz": np.uint8(140), "ys": np.float32(0.07), "yz": np.uint8(90),
             "cs": np.float32(0.02), "cz": np.int8(-6),
             "v": RNG.integers(-128, 128, (1, c, 1, 1)).astype(np.int8)}
    def dq(i, s, z, o):
        return helper.make_node("DequantizeLinear", [i, s, z], [o])
    def q(i, s, z, o):
        return helper.make_node("QuantizeLinear", [i, s, z], [o])
    nodes = [dq("a", "as", "az", "af"), dq("b", "bs", "bz", "bf"),
             helper.make_node("MaxPool", ["af"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             q("p", "as", "az", "pool"),
             helper.make_node("Add", ["af", "bf"], ["s"]), q("s", "ys", "yz", "sum"),
             dq("a", "as", "az", "af2"), dq("b", "bs", "bz", "bf2"),
             helper.make_node("Add", ["af2", "bf2"], ["s2"]), helper.make_node("Relu", ["s2"], ["r"]),
             q("r", "cs", "cz", "relu"),
             dq("a", "as", "az", "af3"), dq("v", "cs", "cz", "vf"),
             helper.make_node("Add", ["af3", "vf"], ["s3"]), q("s3", "ys", "yz", "wide")]
    shape = ["n", c, 9, 7]
    m = _model(nodes, [("a", "uint8", shape), ("b", "uint8", shape)],
               [("pool", "uint8", 4), ("sum", "uint8", 4), ("relu", "int8", 4),
                ("wide", "uint8", 4)], {k: v for k, v in inits.items()})
    g = pl.graph.from_onnx(m)
    assert [type(f).__name__ for f in _integer_kernels(g)] == ["IntegerAdd"] * 2
    bodies = [[c.op for c in b.kernel.body] for b in pl.graph.optimize(g).bindings
              if isinstance(b, KernelCall)]
    assert [Op.POOL] in bodies and not any(Op.MAX_POOL2D in ops for ops in bodies)
    a, b = (RNG.integers(0, 256, (2, c, 9, 7)).astype(np.uint8) for _ in range(2))
    for got, want in zip(_poisoned(pl.graph.build(g), a, b), _ort(m, {"a": a, "b": b})):
        _within_one_step(got, want)


def test_qdq_residual_block_channels_last(tmp_path):
    """A residual CNN quantized by ONNX Runtime (QDQ, per channel): stem conv, max pool, two
    convolutions added to a strided 1 x 1 shortcut, relu, a convolution, a float global pool.
    The activations between integer layers run NHWC (the pool as ``IntegerMaxPool``, the
    addition on NHWC operands), NCHW only where a float operation reads them; the output
    equals ORT's within one output step, every element written."""
    torch = pytest.importorskip("torch")
    quant = pytest.importorskip("onnxruntime.quantization")
    from polyloop.graph.integer import IntegerMaxPool

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 13, 3, padding=1)
            self.a = torch.nn.Conv2d(13, 21, 3, stride=2, padding=1)
            self.b = torch.nn.Conv2d(21, 37, 1)
            self.short = torch.nn.Conv2d(13, 37, 1, stride=2)
            self.tail = torch.nn.Conv2d(37, 9, 3, padding=1)

        def forward(self, x):
            x = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 3, 2, 1)
            y = torch.relu(self.b(torch.relu(self.a(x))) + self.short(x))
            return torch.relu(self.tail(y)).mean((2, 3))

    torch.manual_seed(0)
    src, dst = tmp_path / "res.onnx", tmp_path / "res_qdq.onnx"
    torch.onnx.export(Net().eval(), torch.randn(1, 3, 21, 19), str(src), input_names=["x"],
                      output_names=["y"], opset_version=13, dynamo=False,
                      dynamic_axes={"x": {0: "n"}})

    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": RNG.standard_normal((2, 3, 21, 19)).astype(np.float32)}
                            for _ in range(3)])

        def get_next(self):
            return next(self.it, None)

    quant.quantize_static(str(src), str(dst), Reader(), quant_format=quant.QuantFormat.QDQ,
                          per_channel=True, activation_type=quant.QuantType.QUInt8,
                          weight_type=quant.QuantType.QInt8)
    m = onnx.load(str(dst))
    g = pl.graph.from_onnx(m)
    calls = [c for b in pl.graph.optimize(g).bindings if isinstance(b, KernelCall)
             for c in b.kernel.body if c.op is Op.TE]
    convs = [c.attr("fn") for c in calls if isinstance(c.attr("fn"), IntegerConv)]
    assert sorted((f.in_layout, f.out_layout) for f in convs) == [
        ("NCHW", "NHWC"), ("NHWC", "NCHW"), ("NHWC", "NHWC"), ("NHWC", "NHWC"),
        ("NHWC", "NHWC")]
    assert any(isinstance(c.attr("fn"), IntegerMaxPool) for c in calls)
    x = RNG.standard_normal((2, 3, 21, 19)).astype(np.float32)
    step = max(float(numpy_helper.to_array(i)) for i in m.graph.initializer
               if i.name.endswith("_scale") and i.dims == [])
    got = _poisoned(pl.graph.build(g), x)[0]
    np.testing.assert_allclose(got, _ort(m, {"x": x})[0], rtol=0, atol=step * 1.001)
