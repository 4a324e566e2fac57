# SPDX-License-Identifier: Apache-2.0
"""Random small ONNX models for the importer fuzzer: a chain of one to three operator calls
from templates (random shapes, attributes and constant inputs), then mutated - an attribute
set to another value, an initializer reshaped or refilled, an input rewired to another value,
an input dimension changed - so that valid, borderline and invalid models all occur."""
from __future__ import annotations

import numpy as np

from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


class Model:
    """A model under construction: values with their shapes, nodes, initializers."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.nodes: list = []
        self.inits: list = []
        self.inputs: list = []
        self.k = 0

    def fresh(self, hint: str) -> str:
        self.k += 1
        return f"{hint}{self.k}"

    def input(self, shape: tuple[int, ...]) -> str:
        name = self.fresh("x")
        self.inputs.append(helper.make_tensor_value_info(name, F, list(shape)))
        self.shapes[name] = shape
        return name

    def const(self, arr: np.ndarray) -> str:
        name = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        self.shapes[name] = tuple(np.shape(arr))
        return name

    def node(self, op: str, inputs: list[str], shape: tuple[int, ...] | None, **attrs) -> str:
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        if shape is None:      # best effort: the largest input's (a fuzzer may be wrong)
            shape = max((self.shapes.get(i, ()) for i in inputs), key=len)
        self.shapes[out] = shape
        return out


def _shape(rng, rank: int) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.integers(1, 6, rank))


def _axis(rng, rank: int) -> int:
    return int(rng.integers(-rank, rank))


def _unary(m: Model, x: str) -> str:
    rng = m.rng
    op = str(rng.choice(["Relu", "Abs", "Sigmoid", "Tanh", "Softplus", "Elu", "LeakyRelu",
                         "HardSigmoid", "Neg", "Floor", "Erf", "HardSwish", "Selu"]))
    attrs = {"alpha": float(rng.uniform(0.05, 2))} if op in ("Elu", "LeakyRelu") else {}
    return m.node(op, [x], None, **attrs)


def _binary(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    other = shape[int(rng.integers(0, len(shape))):] if shape else ()
    c = m.const(rng.standard_normal(other).astype("float32") + 2.0)
    op = str(rng.choice(["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"]))
    return m.node(op, [x, c] if rng.random() < 0.5 or op == "PRelu" else [c, x], None)


def _reduce(m: Model, x: str) -> str:
    rng, rank = m.rng, len(m.shapes[x])
    op = str(rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp"]))
    axes = sorted({_axis(rng, rank) % rank for _ in range(int(rng.integers(1, rank + 1)))})
    keep = int(rng.integers(0, 2))
    shape = tuple(1 if k in axes else d for k, d in enumerate(m.shapes[x])) if keep else \
        tuple(d for k, d in enumerate(m.shapes[x]) if k not in axes)
    return m.node(op, [x, m.const(np.array(axes, "int64"))], shape, keepdims=keep)


def _softmax(m: Model, x: str) -> str:
    op = str(m.rng.choice(["Softmax", "LogSoftmax", "Hardmax"]))
    return m.node(op, [x], None, axis=_axis(m.rng, len(m.shapes[x])))


def _arg(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    axis, keep = _axis(rng, len(shape)), int(rng.integers(0, 2))
    a = axis % len(shape)
    out = shape[:a] + ((1,) if keep else ()) + shape[a + 1:]
    y = m.node(str(rng.choice(["ArgMax", "ArgMin"])), [x], out, axis=axis, keepdims=keep,
               select_last_index=int(rng.integers(0, 2)))
    return m.node("Cast", [y], out, to=F)


def _transpose(m: Model, x: str) -> str:
    shape = m.shapes[x]
    perm = [int(p) for p in m.rng.permutation(len(shape))]
    return m.node("Transpose", [x], tuple(shape[p] for p in perm), perm=perm)


def _slice(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    a = int(rng.integers(0, len(shape)))
    d = shape[a]
    step = int(rng.choice([1, 2, -1, -2]))
    start, end = (int(rng.integers(0, d)), d + 1) if step > 0 else (int(rng.integers(0, d)), -d - 1)
    count = len(range(*slice(start, end, step).indices(d)))
    out = shape[:a] + (max(count, 0),) + shape[a + 1:]
    ins = [x] + [m.const(np.array([v], "int64")) for v in (start, end, a, step)]
    return m.node("Slice", ins, out)


def _pad(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    rank = len(shape)
    mode = str(rng.choice(["constant", "reflect", "edge", "wrap"]))
    pads = [int(p) for p in rng.integers(-1, 3, 2 * rank)]
    out = tuple(d + pads[k] + pads[k + rank] for k, d in enumerate(shape))
    return m.node("Pad", [x, m.const(np.array(pads, "int64"))], out, mode=mode)


def _window(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    if len(shape) < 3:
        return _unary(m, x)
    nd = len(shape) - 2
    kernel = [int(k) for k in rng.integers(1, 4, nd)]
    pads = [int(p) for p in rng.integers(0, 2, 2 * nd)]
    strides = [int(s) for s in rng.integers(1, 3, nd)]
    op = str(rng.choice(["MaxPool", "AveragePool", "Conv"]))
    attrs = dict(kernel_shape=kernel, pads=pads, strides=strides)
    if op == "Conv":
        w = m.const(rng.standard_normal((2, shape[1], *kernel)).astype("float32"))
        return m.node(op, [x, w], None, **attrs)
    attrs["ceil_mode"] = int(rng.integers(0, 2))
    if op == "AveragePool":
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    return m.node(op, [x], None, **attrs)


def _gather(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    axis = _axis(rng, len(shape))
    d = shape[axis % len(shape)]
    idx = m.const(rng.integers(-d, d, int(rng.integers(1, 4))).astype("int64"))
    return m.node("Gather", [x, idx], None, axis=axis)


def _misc(m: Model, x: str) -> str:
    rng, shape = m.rng, m.shapes[x]
    choice = int(rng.integers(0, 5))
    if choice == 0:
        return m.node("Flatten", [x], None, axis=int(rng.integers(-len(shape), len(shape) + 1)))
    if choice == 1:
        return m.node("CumSum", [x, m.const(np.array(_axis(rng, len(shape)), "int64"))], None,
                      exclusive=int(rng.integers(0, 2)), reverse=int(rng.integers(0, 2)))
    if choice == 2:
        return m.node("Tile", [x, m.const(rng.integers(1, 3, len(shape)).astype("int64"))],
                      None)
    if choice == 3:
        return m.node("Clip", [x, m.const(np.array(-0.5, "float32")),
                               m.const(np.array(0.5, "float32"))], None)
    return m.node("Concat", [x, x], None, axis=_axis(rng, len(shape)))


TEMPLATES = [_unary, _binary, _reduce, _softmax, _arg, _transpose, _slice, _pad, _window,
             _gather, _misc]


def _mutate(m: Model) -> None:
    rng = m.rng
    roll = rng.random()
    if roll < 0.25 and m.nodes:
        node = m.nodes[int(rng.integers(0, len(m.nodes)))]
        if node.attribute:
            a = node.attribute[int(rng.integers(0, len(node.attribute)))]
            if a.type == a.INT:
                a.i = int(rng.integers(-4, 6))
            elif a.type == a.INTS and a.ints:
                a.ints[int(rng.integers(0, len(a.ints)))] = int(rng.integers(-3, 5))
            elif a.type == a.FLOAT:
                a.f = float(rng.uniform(-2, 2))
    elif roll < 0.4 and m.inits:
        t = m.inits[int(rng.integers(0, len(m.inits)))]
        arr = numpy_helper.to_array(t)
        if arr.dtype.kind == "i" and arr.size:
            arr = arr.copy().reshape(-1)
            arr[int(rng.integers(0, arr.size))] = int(rng.integers(-7, 8))
            arr = arr.reshape(numpy_helper.to_array(t).shape)
        t.CopyFrom(numpy_helper.from_array(arr, t.name))
    elif roll < 0.5 and len(m.nodes) > 1:
        node = m.nodes[-1]
        node.input[0] = m.nodes[0].output[0]
    elif roll < 0.6:
        dims = m.inputs[0].type.tensor_type.shape.dim
        dims[int(rng.integers(0, len(dims)))].dim_value = int(rng.integers(1, 7))


def random_model(seed: int):
    """A model from ``seed``: (model, input arrays)."""
    rng = np.random.default_rng(seed)
    m = Model(rng)
    x = m.input(_shape(rng, int(rng.integers(1, 5))))
    for _ in range(int(rng.integers(1, 4))):
        template = TEMPLATES[int(rng.integers(0, len(TEMPLATES)))]
        x = template(m, x) if m.shapes[x] and min(m.shapes[x]) > 0 else _unary(m, x)
    _mutate(m)
    graph = helper.make_graph(m.nodes, f"fuzz{seed}", m.inputs,
                              [helper.make_tensor_value_info(
                                  x, F, [f"d{k}" for k in range(len(m.shapes[x]))])], m.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              ir_version=8)
    inputs = []
    for v in m.inputs:
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        inputs.append(rng.standard_normal(shape).astype("float32"))
    return model, inputs
