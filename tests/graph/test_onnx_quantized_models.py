# SPDX-License-Identifier: Apache-2.0
"""Models quantized by ONNX Runtime's tool, imported by ``from_onnx`` and compared with ONNX
Runtime on the same quantized model: a BERT-like encoder quantized dynamically
(``quantize_dynamic``: ``DynamicQuantizeLinear`` + ``MatMulInteger``, standard ONNX), an
Inception-like block quantized statically (QDQ), and 8-bit tensors passing through
pooling, ReLU, concat and reshapes between equal quantizations; odd sizes, symbolic batch,
poisoned outputs."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="the models are written in PyTorch (extra 'test')")
onnx = pytest.importorskip("onnx", reason="the quantized models need onnx (extra 'graph')")
ort = pytest.importorskip("onnxruntime", reason="the reference is ONNX Runtime")
quantization = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyloop.graph.integer import IntegerConv, IntegerMatmul  # noqa: E402
from polyloop.graph.ir import Op  # noqa: E402

RNG = np.random.default_rng(0)


class _Encoder(torch.nn.Module):
    """One BERT/DistilBERT layer: token and position embeddings, layer norms, four-head
    self-attention, a GELU feed-forward of an odd width."""

    def __init__(self, vocab=97, dim=36, heads=4, ffn=53, seq=7):
        super().__init__()
        self.heads = heads
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(seq, dim) * 0.1)
        self.ln0, self.ln1, self.ln2 = (torch.nn.LayerNorm(dim) for _ in range(3))
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim) for _ in range(4))
        self.f1, self.f2 = torch.nn.Linear(dim, ffn), torch.nn.Linear(ffn, dim)

    def forward(self, ids):
        x = self.ln0(self.tok(ids) + self.pos)
        b, n, d = x.shape

        def split(t):
            return t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = torch.softmax(q @ k.transpose(2, 3) / (d // self.heads) ** 0.5, -1) @ v
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, n, d)))
        return self.ln2(x + self.f2(torch.nn.functional.gelu(self.f1(x))))


class _Inception(torch.nn.Module):
    """Three branches (1x1, 3x3, max pool then 1x1) concatenated, max pool, ReLU, transpose,
    flatten, linear."""

    def __init__(self, c=5):
        super().__init__()
        self.b1, self.b2 = torch.nn.Conv2d(c, 4, 1), torch.nn.Conv2d(c, 6, 3, padding=1)
        self.b3, self.fc = torch.nn.Conv2d(c, 3, 1), torch.nn.Linear(13 * 5 * 4, 7)

    def forward(self, x):
        pooled = torch.nn.functional.max_pool2d(x, 3, 1, 1)
        y = torch.cat([torch.relu(self.b1(x)), torch.relu(self.b2(x)), self.b3(pooled)], 1)
        y = torch.relu(torch.nn.functional.max_pool2d(y, 2))
        return self.fc(y.transpose(2, 3).flatten(1))


def _export(model, x, path, dynamic=None):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (x,), path, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes=dynamic)


def _session(path):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _poisoned(ex, x):
    """The output with every element written: runs into outputs filled with NaN and with 0
    agree."""
    sizes = {d: n for d, n in zip(ex.graph.inputs[0].type.shape, x.shape) if isinstance(d, str)}
    runs = []
    for fill in (np.nan, 0.0):
        out = np.full(ex.graph.outputs[0].type.concrete(sizes), fill, np.float32)
        ex(x, out=(out,))
        runs.append(out)
    assert not np.isnan(runs[0]).any()
    np.testing.assert_array_equal(*runs)
    return runs[0]


def _integer_layers(g) -> list:
    return [c.attr("fn") for c in g.bindings if getattr(c, "op", None) is Op.TE
            and isinstance(c.attr("fn"), (IntegerConv, IntegerMatmul))]


def test_bert_encoder_quantized_dynamically(tmp_path):
    """``quantize_dynamic`` on MatMul (int8 weights per output column; activations
    quantized to uint8 at run time, zero points other than 0): every weight product runs as
    an integer kernel; polyloop's result is ONNX Runtime's on the quantized model up to float
    rounding (a rare activation rounded to the other step), far inside the quantization's own
    error (ONNX Runtime's quantized against its float32 run)."""
    src, dst = str(tmp_path / "encoder.onnx"), str(tmp_path / "encoder_dynamic.onnx")
    _export(_Encoder(), torch.randint(0, 97, (2, 7)), src, {"x": {0: "batch"}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_dynamic(src, dst, op_types_to_quantize=["MatMul"],
                                      per_channel=True,
                                      weight_type=quantization.QuantType.QInt8)
    ops = {n.op_type for n in onnx.load(dst).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    g = pl.graph.from_onnx(dst)
    assert len(_integer_layers(g)) == 6           # q, k, v, out, and the two of the ffn
    ex = pl.graph.build(g)
    quantized, float32 = _session(dst), _session(src)
    for batch in (1, 3):
        x = RNG.integers(0, 97, (batch, 7)).astype(np.int64)
        want = quantized.run(None, {"x": x})[0]
        error = np.abs(want - float32.run(None, {"x": x})[0]).max()
        diff = np.abs(_poisoned(ex, x) - want)
        assert diff.max() <= 0.5 * error and (diff < 1e-4).mean() > 0.99, (diff.max(), error)


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self, shape):
        rng = np.random.default_rng(1)
        self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)}
                             for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


def _equal_around(m, inits) -> list[bool]:
    """For each MaxPool of the QDQ model: are its input's DequantizeLinear and the
    QuantizeLinear after it (through a Relu) of one scale and zero point?"""
    producer = {o: n for n in m.graph.node for o in n.output}
    reader = {i: n for n in m.graph.node for i in n.input}

    def params(node):
        return [inits[i].tobytes() for i in node.input[1:3]]
    equal = []
    for node in (n for n in m.graph.node if n.op_type == "MaxPool"):
        after = reader[node.output[0]]
        after = reader[after.output[0]] if after.op_type == "Relu" else after
        equal.append(params(producer[node.input[0]]) == params(after))
    return equal


def test_inception_block_quantized_statically(tmp_path):
    """``quantize_static`` (QDQ, uint8 activations, int8 weights per channel): the
    convolutions and the linear run as integer kernels; the transpose, the flatten and each
    max pooling between equal quantizations run on uint8; the concat of three quantizations
    and a pooling that changes the quantization stay float32 (as ONNX Runtime requantizes
    them); the result is ONNX Runtime's within one output step."""
    shape = (2, 5, 11, 9)
    src, dst = str(tmp_path / "block.onnx"), str(tmp_path / "block_qdq.onnx")
    _export(_Inception(), torch.randn(shape), src)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantization.quantize_static(src, dst, _Calibration(shape),
                                     quant_format=quantization.QuantFormat.QDQ,
                                     per_channel=True,
                                     activation_type=quantization.QuantType.QUInt8,
                                     weight_type=quantization.QuantType.QInt8)
    g = pl.graph.from_onnx(dst)
    assert [type(k) for k in _integer_layers(g)] == [IntegerConv] * 3 + [IntegerMatmul]
    m = onnx.load(dst)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dtypes = {op: [c.outputs[0].type.dtype for c in g.bindings if getattr(c, "op", None) is op]
              for op in (Op.POOL, Op.MAX_POOL2D, Op.PERMUTE, Op.RESHAPE, Op.CONCAT)}
    pools = sorted(dtypes[Op.POOL] + dtypes[Op.MAX_POOL2D])
    assert pools == sorted(("uint8" if q else "float32") for q in _equal_around(m, inits))
    assert dtypes[Op.PERMUTE] == dtypes[Op.RESHAPE] == ["uint8"]
    assert dtypes[Op.CONCAT] == ["float32"]
    last = [n for n in m.graph.node if n.output[0] == "y"][0]
    step = float(inits[last.input[1]])
    ex, session = pl.graph.build(g), _session(dst)
    for _ in range(2):
        x = RNG.standard_normal(shape).astype(np.float32)
        steps = np.abs(_poisoned(ex, x) - session.run(None, {"x": x})[0]) / step
        assert steps.max() <= 1.001 and (steps < 0.5).mean() > 0.95


def _qdq(op, data, scale, zero, out):
    return helper.make_node(op, [data, scale, zero], [out])


def _passing_model():
    """The model of ``test_pass_through_operators_stay_integer``."""
    nodes = [_qdq("DequantizeLinear", "a", "s", "z", "af"),
             helper.make_node("Relu", ["af"], ["r"]), _qdq("QuantizeLinear", "r", "s", "z", "rq"),
             _qdq("DequantizeLinear", "rq", "s", "z", "rf"),
             helper.make_node("MaxPool", ["rf"], ["p"], kernel_shape=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["p"], ["pr"]), _qdq("QuantizeLinear", "pr", "s", "z", "pq"),
             _qdq("DequantizeLinear", "pq", "s", "z", "pf"),
             _qdq("DequantizeLinear", "rq", "s", "z", "rf2"),
             helper.make_node("Concat", ["rf2", "rf2"], ["c"], axis=1),
             _qdq("QuantizeLinear", "c", "s", "z", "cq"),
             _qdq("DequantizeLinear", "cq", "s", "z", "cf"),
             helper.make_node("Unsqueeze", ["cf", "axes"], ["u"]),
             _qdq("QuantizeLinear", "u", "s", "z", "uq"),
             _qdq("DequantizeLinear", "uq", "s", "z", "uf"),
             helper.make_node("Squeeze", ["uf", "axes"], ["sq"]),
             _qdq("QuantizeLinear", "sq", "s", "z", "sqq"),
             _qdq("DequantizeLinear", "sqq", "s", "z", "sqf"),
             helper.make_node("Reshape", ["sqf", "shape"], ["re"]),
             _qdq("QuantizeLinear", "re", "s", "z", "req"),
             _qdq("DequantizeLinear", "req", "s", "z", "y"),
             _qdq("DequantizeLinear", "pq", "s", "z", "pf2"),
             helper.make_node("Relu", ["pf2"], ["other"]),
             _qdq("QuantizeLinear", "other", "s2", "z", "oq")]
    inits = {"s": np.float32(0.04), "z": np.int8(-7), "s2": np.float32(0.05),
             "axes": np.array([0], np.int64), "shape": np.array([0, -1], np.int64)}
    graph = helper.make_graph(
        nodes, "passing", [helper.make_tensor_value_info("a", TensorProto.INT8, ["n", 3, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 210]),
         helper.make_tensor_value_info("pq", TensorProto.INT8, ["n", 3, 6, 8]),
         helper.make_tensor_value_info("oq", TensorProto.INT8, ["n", 3, 6, 8])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_pass_through_operators_stay_integer():
    """A hand-written QDQ model whose every quantization is one (scale 0.04, zero point -7,
    int8): a ReLU, a max pooling followed by a ReLU, a concat, an unsqueeze/squeeze pair and
    a reshape, each between a DequantizeLinear and a QuantizeLinear, all run on int8 (no
    float operation left but the final dequantization) and equal ONNX Runtime's exactly; a
    different output quantization keeps its operator in float32."""
    m = _passing_model()
    g = pl.graph.from_onnx(m)
    moved = [(c.op, c.outputs[0].type.dtype) for c in g.bindings
             if c.op in (Op.POOL, Op.MAX_POOL2D, Op.CONCAT, Op.RELU, Op.RESHAPE)]
    assert moved == [(Op.POOL, "int8"), (Op.CONCAT, "int8")] + [(Op.RESHAPE, "int8")] * 3 + \
        [(Op.RELU, "float32")]
    ex = pl.graph.build(g)
    a = RNG.integers(-128, 128, (2, 3, 5, 7)).astype(np.int8)
    runs = []
    for fill in (0, 1):
        outs = tuple(np.full(v.type.concrete({"n": 2}), np.nan if v.type.dtype == "float32"
                             else 100 * fill - 50, v.type.dtype) for v in g.outputs)
        ex(a, out=outs)
        runs.append(outs)
    for first, second, want in zip(*runs, _session(m.SerializeToString()).run(None, {"a": a})):
        np.testing.assert_array_equal(first, second)
        np.testing.assert_array_equal(first, want)
