# SPDX-License-Identifier: Apache-2.0
"""PT2E-quantized PyTorch models (``prepare_pt2e``/``convert_pt2e`` with torchao's quantizers)
imported by ``from_torch``: the quantized layers run as integer kernels and give the converted
model's own output on fresh data within one quantization step; per tensor (int8 activations
with zero points other than 0) and per channel (uint8 activations), odd sizes, a symbolic
batch, poisoned outputs; what is not supported is refused by name."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import polyloop as pl

torch = pytest.importorskip("torch", reason="PT2E models are PyTorch models (extra 'graph')")
pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e",
                           reason="PT2E quantization lives in torchao (extra 'test')")
x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
xnnpack = pytest.importorskip("torchao.testing.pt2e._xnnpack_quantizer")

from polyloop.graph.integer import IntegerConv, IntegerMatmul  # noqa: E402
from polyloop.graph.ir import Op  # noqa: E402


class _CNN(torch.nn.Module):
    """conv-relu-maxpool, a strided conv, a depthwise conv (left in float32 by the fold),
    flatten, linear."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 6, 3, stride=2)
        self.dw = torch.nn.Conv2d(6, 6, 3, padding=1, groups=6)
        self.fc = torch.nn.Linear(6 * 4 * 4, 7)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        return self.fc(self.dw(self.c2(y)).flatten(1))


class _Branches(torch.nn.Module):
    """Two convolutions of one input, max pooling and a ReLU between quantizations, a concat
    of two quantizations (kept in float32), flatten, linear."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(3, 5, 1)
        self.fc = torch.nn.Linear(9 * 5 * 5, 6)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.a(x)), 2)
        z = torch.relu(torch.nn.functional.max_pool2d(self.b(x), 2))
        return self.fc(torch.cat([y, z], 1).flatten(1))


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(13, 21), torch.nn.Linear(21, 6)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _converted(model, x, quantizer, dynamic=None):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model.eval(), (x,), dynamic_shapes=dynamic).module()
        prepared = pt2e.prepare_pt2e(exported, quantizer)
        for _ in range(4):
            prepared(torch.randn(x.shape) * 1.5 + 0.3)
        return pt2e.convert_pt2e(prepared)


def _integer_layers(g) -> list:
    return [c.attr("fn") for c in g.bindings if getattr(c, "op", None) is Op.TE
            and isinstance(c.attr("fn"), (IntegerConv, IntegerMatmul))]


def _poisoned(ex, x):
    """The output with every element written: runs into outputs filled with NaN and with 0
    agree."""
    shape = ex.graph.outputs[0].type.concrete(
        {d: n for d, n in zip(ex.graph.inputs[0].type.shape, x.shape) if isinstance(d, str)})
    runs = []
    for fill in (np.nan, 0.0):
        out = np.full(shape, fill, np.float32)
        ex(x, out=(out,))
        runs.append(out)
    assert not np.isnan(runs[0]).any()
    np.testing.assert_array_equal(*runs)
    return runs[0]


def _last_quantization(model, name: str) -> tuple[float, int]:
    node = [n for n in model.graph.nodes if n.name == name][0]
    return float(node.args[1]), int(node.args[2])


def test_pt2e_cnn_per_channel():
    """X86InductorQuantizer: uint8 activations, int8 weights per channel; the conv-relu is
    quantized after the max pooling (quantizing commutes with it), the last linear's result
    stays float32 (as PyTorch leaves it)."""
    model = _CNN()
    x = torch.randn(2, 3, 19, 19)
    quantizer = x86.X86InductorQuantizer().set_global(
        x86.get_default_x86_inductor_quantization_config())
    converted = _converted(model, x, quantizer)
    g = pl.graph.from_torch(converted, (x,))
    kernels = _integer_layers(g)
    assert len(kernels) == 2 and all(isinstance(k, IntegerConv) for k in kernels)
    assert all(k.epilogue.out_dtype == "uint8" for k in kernels)
    pools = [c for c in g.bindings if getattr(c, "op", None) is Op.MAX_POOL2D]
    assert [p.outputs[0].type.dtype for p in pools] == ["uint8"]
    ex = pl.graph.build(g)
    # the linear reads uint8 values at one scale: a difference of one step in each gives at
    # most scale * (the largest row sum of |W|)
    dq = [n for n in converted.graph.nodes if n.name.startswith("dequantize_per_tensor")][-1]
    w = model.fc.weight.detach().numpy()
    bound = float(dq.args[1]) * np.abs(w).sum(axis=1).max() * 1.001
    for _ in range(2):
        xs = torch.randn(2, 3, 19, 19) * 1.5 + 0.3
        want = converted(xs).detach().numpy()
        got = _poisoned(ex, xs.numpy())
        assert np.abs(got - want).max() <= bound


def _within_one_step(converted, ex, xs):
    """The model's result (dequantized int8) against PyTorch's: one step at most, mostly
    none."""
    out = [n for n in converted.graph.nodes if n.op == "output"][0].args[0][0]
    scale, _ = _last_quantization(converted, out.name)
    steps = np.abs(_poisoned(ex, xs.numpy()) - converted(xs).detach().numpy()) / scale
    assert steps.max() <= 1.001 and (steps < 0.5).mean() > 0.95


def test_pt2e_branches_per_tensor():
    """XNNPACKQuantizer per tensor: int8 activations and weights; max pooling and the ReLU
    after it run on the int8 tensors (the ReLU as the maximum with the zero point), the
    concat of two quantizations stays float32."""
    x = torch.randn(2, 3, 11, 11)
    quantizer = xnnpack.XNNPACKQuantizer().set_global(
        xnnpack.get_symmetric_quantization_config(is_per_channel=False))
    converted = _converted(_Branches(), x, quantizer)
    g = pl.graph.from_torch(converted, (x,))
    assert [type(k) for k in _integer_layers(g)] == [IntegerConv, IntegerConv, IntegerMatmul]
    calls = [c for c in g.bindings if hasattr(c, "op")]
    assert [c.outputs[0].type.dtype for c in calls if c.op is Op.MAX_POOL2D] == ["int8"] * 2
    assert [c.outputs[0].type.dtype for c in calls if c.op is Op.CONCAT] == ["float32"]
    ex = pl.graph.build(g)
    for _ in range(2):
        _within_one_step(converted, ex, torch.randn(2, 3, 11, 11) * 1.5 + 0.3)


def test_pt2e_linear_per_channel_symbolic_batch():
    """XNNPACKQuantizer per channel: int8 activations with zero points other than 0, a 3-D
    input with a symbolic batch, linear-relu-linear, the result quantized."""
    x = torch.randn(2, 5, 13)
    quantizer = xnnpack.XNNPACKQuantizer().set_global(
        xnnpack.get_symmetric_quantization_config(is_per_channel=True))
    converted = _converted(_MLP(), x, quantizer, ({0: torch.export.Dim("n")},))
    g = pl.graph.from_torch(converted, (x,), batch="n")
    kernels = _integer_layers(g)
    assert len(kernels) == 2 and all(isinstance(k, IntegerMatmul) for k in kernels)
    assert {k.epilogue.a_zero for k in kernels} - {0}, "zero points other than 0"
    ex = pl.graph.build(g)
    for n in (1, 3):
        _within_one_step(converted, ex, torch.randn(n, 5, 13) * 1.5 + 0.3)


def test_pt2e_dynamic_quantization_is_refused():
    """Scales computed by the model (PT2E's dynamic quantization) are not supported: the build
    refuses each such call by name and says why."""
    model = torch.nn.Linear(13, 5)
    x = torch.randn(2, 13)
    quantizer = xnnpack.XNNPACKQuantizer().set_global(
        xnnpack.get_symmetric_quantization_config(is_dynamic=True))
    g = pl.graph.from_torch(_converted(model, x, quantizer), (x,))
    with pytest.raises(pl.PolyloopError, match="quantize_per_tensor.*computed by the model"):
        pl.graph.build(g)
