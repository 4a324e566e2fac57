# SPDX-License-Identifier: Apache-2.0
"""``pl.graph.quantize``: static post-training quantization by polyloop.

A small CNN (conv+relu+pool+conv+relu+gemm, odd channel counts) and an MLP of matrix products
(3-D activations, a symbolic batch) are quantized by polyloop and, on the same calibration
data, by ONNX Runtime's ``quantize_static`` (min-max, QDQ): the scales, zero points and int8
weights agree, and the quantized model built by polyloop equals ONNX Runtime's run of ONNX
Runtime's QDQ model within one output step (both fail if a range is taken from the wrong
tensor). Against the float model, the output stays within the worst-case error the scales
allow (each layer: half a step of its input, weights, bias and output, carried through the
weights' row sums). Per channel and per tensor, zero points other than 0, int8 and symmetric
activations, percentile calibration, layers left in float32, refused inputs; every output
element written."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph.integer import IntegerConv, IntegerMatmul
from polyloop.graph.ir import KernelCall, Op
from polyloop.graph.quant import Plan, apply, plan
from polyloop.graph.quant.fragment import LayerQuantization
from polyloop.graph.quant.layers import find_layers
from polyloop.graph.quant.params import activation_quantization, weight_quantization
from polyloop.graph.quant.options import Method, Options

onnx = pytest.importorskip("onnx", reason="quantize folds layers through the ONNX importer")
ort = pytest.importorskip("onnxruntime", reason="the reference is ONNX Runtime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(7)


def _model(nodes, x_shape, y_rank, inits):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                         [f"y{k}" for k in range(y_rank)])],
                          [numpy_helper.from_array(a, k) for k, a in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _cnn():
    """conv(3->13)+relu, max pool, conv(13->21, stride 2)+relu, flatten, gemm(->10)."""
    inits = {"w1": RNG.standard_normal((13, 3, 3, 3)).astype(np.float32) * 0.3,
             "b1": RNG.standard_normal(13).astype(np.float32) * 0.1,
             "w2": RNG.standard_normal((21, 13, 3, 3)).astype(np.float32) * 0.1,
             "b2": RNG.standard_normal(21).astype(np.float32) * 0.1,
             "w3": RNG.standard_normal((10, 21 * 5 * 5)).astype(np.float32) * 0.05,
             "b3": RNG.standard_normal(10).astype(np.float32)}
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1] * 4),
             node("Relu", ["c1"], ["r1"]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1] * 4, strides=[2, 2]),
             node("Relu", ["c2"], ["r2"]), node("Flatten", ["r2"], ["f"]),
             node("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    # ONNX Runtime's names of each layer's input, result and weights
    names = [("x", "r1", "w1"), ("p1", "r2", "w2"), ("f", "y", "w3")]
    return _model(nodes, ["n", 3, 19, 19], 2, inits), names


def _mlp():
    """MatMul + Add + Relu, MatMul + Relu on (n, 5, 37) activations, reshaped, Gemm."""
    inits = {"W1": RNG.standard_normal((37, 23)).astype(np.float32),
             "b1": RNG.standard_normal(23).astype(np.float32),
             "W2": RNG.standard_normal((23, 11)).astype(np.float32),
             "W3": RNG.standard_normal((11, 7)).astype(np.float32),
             "b3": RNG.standard_normal(7).astype(np.float32),
             "shape": np.array([-1, 11], np.int64)}
    node = helper.make_node
    nodes = [node("MatMul", ["x", "W1"], ["h"]), node("Add", ["h", "b1"], ["a"]),
             node("Relu", ["a"], ["r"]), node("MatMul", ["r", "W2"], ["m"]),
             node("Relu", ["m"], ["r2"]), node("Reshape", ["r2", "shape"], ["f"]),
             node("Gemm", ["f", "W3", "b3"], ["y"])]
    names = [("x", "h", "W1"), ("r", "r2", "W2"), ("f", "y", "W3")]
    return _model(nodes, ["n", 5, 37], 2, inits), names


def _ort_static(tmp_path, m, batches, per_channel):
    quant = pytest.importorskip("onnxruntime.quantization")

    class Reader(quant.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": b} for b in batches])

        def get_next(self):
            return next(self.it, None)
    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(m, src)
    quant.quantize_static(str(src), str(dst), Reader(), quant_format=quant.QuantFormat.QDQ,
                          per_channel=per_channel, activation_type=quant.QuantType.QUInt8,
                          weight_type=quant.QuantType.QInt8,
                          op_types_to_quantize=["Conv", "Gemm", "MatMul", "Relu"])
    return onnx.load(str(dst))


def _ort(m, x):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def _poisoned(mod, x):
    """The output of model ``mod`` written twice over NaN-filled arrays."""
    shape = mod(x).shape
    outs = [np.full(shape, np.nan, np.float32) for _ in range(2)]
    for o in outs:
        mod(x, out=(o,))
    assert not np.isnan(outs[0]).any() and np.array_equal(outs[0], outs[1])
    return outs[0]


def _integer_kernels(g) -> list[str]:
    return [type(c.attr("fn")).__name__ for b in pl.graph.optimize(g).bindings
            if isinstance(b, KernelCall) for c in b.kernel.body
            if c.op is Op.TE and isinstance(c.attr("fn"), (IntegerConv, IntegerMatmul))]


def _error_bound(layers, quantizations) -> float:
    """The largest error quantization can add to a chain of quantized layers on inputs
    inside the calibrated ranges: per layer, the input's error (the error before it plus half
    a step) through the weights' largest row sum, half a weight step times the sum of the
    largest inputs (the input's range as its scale and zero point give it), half a bias step
    and half an output step. ReLU, max pooling, adding a constant and reshapes do not widen
    an error."""
    error = 0.0
    for layer, q in zip(layers, quantizations):
        w = np.moveaxis(layer.weight, layer.channel_axis, 0)
        w = w.reshape(w.shape[0], -1).astype(np.float64)
        s, z = q.x.step(), int(q.x.zero_point[0])
        lo, hi = np.iinfo(q.x.dtype).min, np.iinfo(q.x.dtype).max
        biggest = s * max(abs(lo - z), abs(hi - z)) + s
        x_in = error + 0.5 * s
        w_step = q.w.scale.astype(np.float64)
        per_channel = np.abs(w).sum(axis=1) * x_in + 0.5 * w_step * w.shape[1] * (biggest + x_in)
        error = float(per_channel.max()) + 0.5 * s * float(w_step.max()) + 0.5 * q.y.step()
    return error


def _check_scales(p, qdq, names):
    """Each layer's input, result and weights quantized as ONNX Runtime's QDQ model has
    them: scales to float precision, zero points and int8 weights exactly."""
    theirs = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    for (x, y, w), layer, q in zip(names, p.layers, p.quantizations, strict=True):
        assert (layer.x.name, layer.out.name) == (x, y)
        for mine, name in ((q.x, x), (q.y, y), (q.w, w)):
            # float precision: polyloop's and ORT's float layers sum in different orders
            np.testing.assert_allclose(mine.scale, theirs[f"{name}_scale"].reshape(-1),
                                       rtol=1e-6)
            np.testing.assert_array_equal(mine.zero_point,
                                          theirs[f"{name}_zero_point"].reshape(-1))
        want = theirs[f"{w}_quantized"]
        np.testing.assert_array_equal(q.weight, want if layer.weight.shape == want.shape
                                      else want.T)
    assert any(q.x.zero_point[0] != 0 for q in p.quantizations)
    return float(theirs[f"{names[-1][1]}_scale"])


@pytest.mark.parametrize("model", [_cnn, _mlp])
def test_agrees_with_onnx_runtime(tmp_path, model):
    """Per channel (and, for the CNN, per tensor), calibration batches of several sizes: the
    scales are ONNX Runtime's; the built model equals ONNX Runtime's QDQ run within one
    output step, and the float model within the error bound of the scales."""
    m, names = model()
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    batches = [RNG.standard_normal([k] + shape[1:]).astype(np.float32) for k in (2, 3, 1)]
    g = pl.graph.from_onnx(m)
    before = str(g)
    if model is _cnn:
        per_tensor = plan(g, batches, Options(per_channel=False))
        _check_scales(per_tensor, _ort_static(tmp_path, m, batches, False), names)
        assert all(q.w.scale.size == 1 for q in per_tensor.quantizations)
    p = plan(g, batches, Options())
    qdq = _ort_static(tmp_path, m, batches, True)
    step = _check_scales(p, qdq, names)
    assert all(q.w.scale.size == layer.weight.shape[layer.channel_axis]
               for layer, q in zip(p.layers, p.quantizations))
    qg = apply(p)
    assert str(g) == before
    assert len(_integer_kernels(qg)) == 3
    mod = pl.graph.build(qg)
    x = RNG.standard_normal([3] + shape[1:]).astype(np.float32)
    np.testing.assert_allclose(_poisoned(mod, x), _ort(qdq, x), rtol=0, atol=step * 1.001)
    # against the float model, on calibration data (inside the calibrated ranges)
    error = np.abs(_poisoned(mod, batches[1]) - _ort(m, batches[1])).max()
    bound = _error_bound(p.layers, p.quantizations)
    assert 0 < error <= bound + 1e-4, (error, bound)


def _builder_graph():
    """x -> grouped conv (stays float32) -> relu -> conv (stride 2) -> relu -> reshape ->
    linear with a bias over the last axis, with a symbolic batch."""
    w = {"w0": RNG.standard_normal((6, 2, 3, 3)) * 0.3, "b0": RNG.standard_normal(6) * 0.1,
         "w1": RNG.standard_normal((5, 6, 3, 3)) * 0.2, "b1": RNG.standard_normal(5) * 0.1,
         "w2": RNG.standard_normal((3, 42)) * 0.2, "b2": RNG.standard_normal(3)}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    b = pl.graph.GraphBuilder("net")
    c = {k: b.constant(v, k) for k, v in w.items()}
    x = b.input("x", ("n", 4, 11, 13))
    conv = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=2)
    h = b.emit(Op.RELU, b.emit(Op.CONV2D, x, c["w0"], c["b0"], **conv))
    conv.update(stride=(2, 2), groups=1)
    h = b.emit(Op.RELU, b.emit(Op.CONV2D, h, c["w1"], c["b1"], **conv))
    h = b.emit(Op.RESHAPE, h, shape=("n", 5, 42))
    return b.build(b.emit(Op.LINEAR, h, c["w2"], c["b2"])), w


def _float_builder(w, x):
    """The builder graph's float32 values (torch): conv input, conv result, linear product
    (before its bias), output."""
    torch = pytest.importorskip("torch")
    t = {k: torch.from_numpy(v) for k, v in w.items()}
    F = torch.nn.functional
    r0 = F.relu(F.conv2d(torch.from_numpy(x), t["w0"], t["b0"], padding=1, groups=2))
    r1 = F.relu(F.conv2d(r0, t["w1"], t["b1"], stride=2, padding=1))
    product = r1.reshape(x.shape[0], 5, 42) @ t["w2"].T
    return [a.numpy() for a in (r0, r1, product, product + t["b2"])]


def test_builder_graph_int8_symmetric_percentile(capsys):
    """A graph written with the builder, int8 symmetric activations, one scale per tensor:
    the scales are max |value| / 127 of the float values computed by torch; percentile
    calibration narrows the input's range to the percentile; the grouped convolution stays
    in float32; the output stays within the error bound of the float model."""
    g, w = _builder_graph()
    batches = [RNG.standard_normal((k, 4, 11, 13)).astype(np.float32) for k in (2, 3)]
    batches[0][1, 2, 3, 4], batches[1][0, 1, 2, 3] = 40.0, -30.0      # outliers
    options = Options(per_channel=False, activation_dtype="int8", symmetric_activations=True)
    p = plan(g, batches, options)
    kinds = [layer.call.op for layer in p.layers]
    assert kinds == [Op.CONV2D, Op.CONV2D, Op.LINEAR]
    values = [_float_builder(w, x) for x in batches]
    for k, (q, v) in enumerate([(p.quantizations[1].x, 0), (p.quantizations[1].y, 1),
                                (p.quantizations[2].x, 1), (p.quantizations[2].y, 2)]):
        absmax = max(np.abs(val[v]).max() for val in values)
        np.testing.assert_allclose(q.scale, [absmax / 127], rtol=1e-6, err_msg=str(k))
        assert q.zero_point.tolist() == [0] and q.dtype == "int8"
    qg = apply(p)
    assert sorted(_integer_kernels(qg)) == ["IntegerConv", "IntegerMatmul"]
    assert any(c.op is Op.CONV2D and c.attr("groups") == 2 for c in qg.bindings)
    mod = pl.graph.build(qg)
    got = _poisoned(mod, batches[1])
    error = np.abs(got - values[1][3]).max()
    bound = _error_bound(p.layers[1:], p.quantizations[1:])
    assert 0 < error <= bound + 1e-4, (error, bound)
    for sym in (False, True):
        pct = plan(g, batches, Options(method=Method.PERCENTILE, percentile=99.9,
                                       symmetric_activations=sym), progress=sym)
        x = np.sort(np.concatenate([b.reshape(-1) for b in batches]))
        q = pct.quantizations[0].x
        info = np.iinfo(q.dtype)
        lo, hi = q.scale[0] * (np.array([info.min, info.max]) - q.zero_point[0])
        # the range ends at the edge (outwards) of the bin holding the first element kept
        cut = (0.1 if sym else 0.05) / 100
        kept = [x[int(np.floor(cut * x.size))], x[int(np.ceil((1 - cut) * x.size)) - 1]]
        if sym:
            kept[1] = np.sort(np.abs(x))[int(np.ceil((1 - cut) * x.size)) - 1]
        width, step = (40.0 if sym else 70.0) / 2048, q.scale[0]
        assert -step <= hi - kept[1] <= width + step, (hi, kept)
        assert sym or -width - step <= lo - kept[0] <= step, (lo, kept)
        assert hi < 10          # the outliers are cut
    assert "calibration: 100%" in capsys.readouterr().err      # 2 passes of 2 batches


@pytest.mark.parametrize("calibration,match", [
    ([], "calibration is empty"),
    (np.zeros((2, 4, 11, 13), np.float32), "must be a list of batches"),
    ([{"y": np.zeros((2, 4, 11, 13), np.float32)}], r"names \['y'\].*inputs are \['x'\]"),
    ([np.zeros((2, 4, 11, 12), np.float32)], r"batch 0: input 'x': expected shape "
                                             r"float32\[n, 4, 11, 13\].*got \(2, 4, 11, 12\)"),
    ([np.zeros((2, 4, 11, 13), np.float32), np.zeros((2, 4, 11, 13))],
     r"batch 1: input 'x': expected dtype float32, got float64"),
    ([(np.zeros((2, 4, 11, 13), np.float32),) * 2], r"holds 2 array\(s\); the graph takes 1"),
])
def test_refused_calibration(calibration, match):
    g, _ = _builder_graph()
    with pytest.raises(pl.ArgumentError, match=match):
        pl.graph.quantize(g, calibration)


@pytest.mark.parametrize("option,match", [
    (dict(method="kl"), "method='kl' is not one of 'minmax', 'percentile'"),
    (dict(activation_dtype="int4"), "activation_dtype='int4' is not one of"),
    (dict(percentile=0), "percentile=0 must be a number in"),
])
def test_refused_options(option, match):
    g, _ = _builder_graph()
    with pytest.raises(pl.ArgumentError, match=match):
        pl.graph.quantize(g, [np.zeros((1, 4, 11, 13), np.float32)], **option)


def test_quantized_values_are_shared():
    """Three products of one input quantize it once; a product of the reshaped result of
    another reads the quantized result reshaped (no dequantization and quantization between
    them). No calibration: the plan is written by hand."""
    b = pl.graph.GraphBuilder("shared")
    x = b.input("x", ("n", 16))
    ws = [b.constant(RNG.standard_normal((8, 16)).astype(np.float32), f"w{k}") for k in range(3)]
    heads = [b.emit(Op.LINEAR, x, w) for w in ws]
    r = b.emit(Op.RESHAPE, b.emit(Op.RELU, heads[0]), shape=("n", 2, 4))
    last = b.emit(Op.MATMUL, r, b.constant(RNG.standard_normal((4, 5)).astype(np.float32)))
    g = b.build(last, heads[1], heads[2])
    layers = find_layers(g)
    act = activation_quantization(-3.0, 3.0, "uint8")
    qs = []
    for layer in layers:
        w, weight = weight_quantization(layer.weight, layer.channel_axis)
        qs.append(LayerQuantization(act, w, weight, None, None, act))
    qg = apply(Plan(g, tuple(layers), tuple(qs), Options()))
    casts = [c for c in qg.bindings if c.op is Op.CAST and c.attr("dtype") == "uint8"]
    assert len(casts) == 1 and casts[0].inputs[0].type.shape == ("n", 16)
    assert [str(c.outputs[0].type) for c in qg.bindings if c.op is Op.RESHAPE] == \
        ["uint8[n, 2, 4]"]
    assert len([c for c in qg.bindings if c.op is Op.TE]) == 4
