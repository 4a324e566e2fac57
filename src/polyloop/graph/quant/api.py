# SPDX-License-Identifier: Apache-2.0
"""``pl.graph.quantize``: static post-training quantization of a float graph by polyloop."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ArgumentError
from ..ir import VIEWS, Binding, Call, Constant, Graph, TensorType, Value
from ..passes.dce import remove_dead_code
from ..verify import verify
from .calibrate import calibration_batches, observe
from .fragment import LayerQuantization, integer_layer
from .layers import Layer, find_layers, split_linear_bias
from .options import Options
from .params import activation_quantization, bias_quantization, weight_quantization
from .splice import Names, splice


@dataclass(frozen=True, slots=True, eq=False)
class Plan:
    """What calibration chose: the float graph it applies to (``g`` with the biases of
    products over more than two axes split off, see ``layers.split_linear_bias``), its
    quantizable layers, and each one's quantization, in the order of ``layers``."""

    graph: Graph
    layers: tuple[Layer, ...]
    quantizations: tuple[LayerQuantization, ...]
    options: Options


def _layer_quantization(layer: Layer, ranges: dict, o: Options) -> LayerQuantization:
    def act(v: Value):
        return activation_quantization(*ranges[v.name], o.activation_dtype,
                                       o.symmetric_activations)
    x = act(layer.x)
    w, weight = weight_quantization(layer.weight, layer.channel_axis if o.per_channel else None)
    b, bias = bias_quantization(layer.bias, x, w) if layer.bias is not None else (None, None)
    return LayerQuantization(x, w, weight, b, bias, act(layer.out))


def plan(g: Graph, calibration: object, options: Options, *, progress: bool | None = None,
         fallback: str = "error") -> Plan:
    """Calibrate ``g`` on ``calibration`` and choose every layer's quantization."""
    if not isinstance(g, Graph):
        raise ArgumentError(f"quantize: g must be a pl.graph.Graph, got {type(g).__name__}")
    batches = calibration_batches(g, calibration)
    g = split_linear_bias(g)
    layers = find_layers(g)
    observed = list({v.name: v for layer in layers for v in (layer.x, layer.out)}.values())
    ranges = observe(g, observed, batches, options, progress=progress,
                     fallback=fallback) if observed else {}
    return Plan(g, tuple(layers), tuple(_layer_quantization(layer, ranges, options)
                                        for layer in layers), options)


def _reshaped(b: Binding, quantized: dict, names: Names) -> list[Call]:
    """A reshape of a quantized value is also done on its quantized form (the same elements:
    the same range, scale and zero point), so that a layer reading it needs no quantization;
    dead code removal drops it when no layer does."""
    if not (isinstance(b, Call) and b.op in VIEWS and b.inputs[0].name in quantized):
        return []
    q, params = quantized[b.inputs[0].name]
    y = b.outputs[0]
    out = Value(names.fresh(f"{y.name}_q"), TensorType(y.type.shape, q.type.dtype))
    quantized[y.name] = (out, params)
    return [Call((out,), b.op, (q,), b.attrs)]


def apply(p: Plan) -> Graph:
    """The graph of ``p`` with each layer the fold takes replaced by its integer kernel,
    between a quantization of its input (none when the input was quantized before at the same
    scale and zero point: the result of the layer before, or the input of another layer) and
    a dequantization of its result."""
    g, names = p.graph, Names(p.graph)
    at = {id(layer.call): (layer, q) for layer, q in zip(p.layers, p.quantizations)}
    quantized: dict[str, tuple[Value, object]] = {}     # float value -> (its q form, params)
    dropped: set[int] = set()
    constants: list[Constant] = list(g.constants)
    bindings: list[Binding] = []
    for b in g.bindings:
        if id(b) in dropped:
            continue
        if id(b) not in at:
            bindings.append(b)
            bindings += _reshaped(b, quantized, names)
            continue
        layer, q = at[id(b)]
        before = quantized.get(layer.x.name)
        chained = before is not None and before[1].same(q.x)
        sub = integer_layer(layer.form, q, quantized_input=chained)
        if sub is None:
            bindings.append(b)
            continue
        bound = [(sub.inputs[0], before[0] if chained else layer.x),
                 (sub.outputs[0], layer.out)]
        consts, calls, outs = splice(sub, bound, layer.out.name, names)
        constants += consts
        bindings += calls
        quantized[layer.out.name] = (outs[1], q.y)
        if not chained:      # another layer reading the same input at the same scale
            quantized.setdefault(layer.x.name, (outs[2], q.x))
        if layer.relu is not None:
            dropped.add(id(layer.relu))
    out = g.replace(constants=tuple(constants), bindings=tuple(bindings))
    return verify(remove_dead_code(out), where="after quantize", rules=True)


def quantize(g: Graph, calibration: object, *, per_channel: bool = True,
             method: str = "minmax", percentile: float = 99.99,
             activation_dtype: str = "uint8", symmetric_activations: bool = False,
             progress: bool | None = None, fallback: str = "error") -> Graph:
    """Static post-training quantization: a new graph whose convolutions and matrix products
    run as int8 kernels (``g`` itself is unchanged).

    ``calibration`` is a list of input batches (each a dict by input name, a tuple of arrays
    in input order, or one array for a graph of one input), run through ``g`` compiled by
    polyloop to find the range of every input and result of each ``CONV2D``/``CONV``,
    ``LINEAR`` and ``MATMUL`` by constant weights (a result read only by a ReLU takes the
    ReLU's range). ``method="minmax"`` keeps the extremes seen, ``"percentile"`` the range
    holding ``percentile`` % of the values. Activations are quantized to
    ``activation_dtype`` (uint8 by default) with a zero point (``symmetric_activations=True``:
    a range symmetric about 0), weights to symmetric int8 per output channel
    (``per_channel=False``: one scale per tensor), a bias to int32 at the input scale times
    the weight scale, with ONNX Runtime's formulas. Each layer is then written in ONNX's QDQ
    form and folded into an integer kernel exactly as ``from_onnx`` folds a model quantized by
    ONNX Runtime's tool; a layer the integer kernels do not take (grouped or dilated
    convolutions, among others) stays in float32. ``progress``: a progress bar over the
    calibration runs (None: for 16 batches or more, on a terminal); ``fallback``: as
    ``pl.graph.build``'s, for the calibration runs.

    >>> import numpy as np, polyloop as pl
    >>> rng = np.random.default_rng(0)
    >>> w1 = rng.standard_normal((24, 16)).astype("float32")
    >>> w2 = rng.standard_normal((5, 24)).astype("float32")
    >>> b = pl.graph.GraphBuilder("mlp"); x = b.input("x", ("n", 16))
    >>> h = b.emit(pl.graph.Op.RELU, b.emit(pl.graph.Op.LINEAR, x, b.constant(w1, "w1")))
    >>> g = b.build(b.emit(pl.graph.Op.LINEAR, h, b.constant(w2, "w2")))
    >>> data = [rng.standard_normal((8, 16)).astype("float32") for _ in range(4)]
    >>> qg = pl.graph.quantize(g, data)
    >>> y = pl.graph.build(qg)(data[0])          # two uint8 x int8 products in int32
    >>> want = np.maximum(data[0] @ w1.T, 0) @ w2.T
    >>> bool(np.abs(y - want).max() < 0.02 * np.abs(want).max())
    True
    """
    options = Options.parse(per_channel=per_channel, method=method, percentile=percentile,
                            activation_dtype=activation_dtype,
                            symmetric_activations=symmetric_activations)
    return apply(plan(g, calibration, options, progress=progress, fallback=fallback))

