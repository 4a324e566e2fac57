# SPDX-License-Identifier: Apache-2.0
"""Import an ONNX model (the ``onnx`` package) into the graph IR.

Initializers and ``Constant`` nodes become constants; a symbolic input dimension
(``dim_param``) becomes a size parameter of the graph.
"""
from __future__ import annotations

from os import PathLike

import numpy as np

from ..errors import PolyloopError
from .builder import GraphBuilder
from .from_torch import unsupported_error
from .ir import Graph, Op, Value

_UNARY = {"Relu": Op.RELU, "Sigmoid": Op.SIGMOID, "Tanh": Op.TANH, "Sqrt": Op.SQRT,
          "Exp": Op.EXP, "Neg": Op.NEG, "Erf": Op.ERF}
_BINARY = {"Add": Op.ADD, "Sub": Op.SUB, "Mul": Op.MUL, "Div": Op.DIV, "MatMul": Op.MATMUL}
_IDENTITY = {"Identity", "Dropout"}
_OTHER = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Gemm", "Softmax",
          "LogSoftmax", "BatchNormalization", "LayerNormalization", "Reshape", "Transpose",
          "Concat", "ReduceMean", "Gather", "Constant"}
SUPPORTED = set(_UNARY) | set(_BINARY) | _IDENTITY | _OTHER


def _attrs(node) -> dict[str, object]:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _pads(a: dict) -> tuple[int, int]:
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if pads[:2] != pads[2:]:
        raise PolyloopError(f"asymmetric padding {pads} is not supported")
    return int(pads[0]), int(pads[1])


class _OnnxImporter:
    def __init__(self, model) -> None:
        from onnx import numpy_helper
        self.b = GraphBuilder(model.graph.name or "model")
        self.env: dict[str, object] = {}
        for init in model.graph.initializer:
            arr = numpy_helper.to_array(init)
            self.env[init.name] = arr

    def value(self, name: str) -> Value:
        v = self.env[name]
        if isinstance(v, np.ndarray):
            v = self.b.constant(v.copy(), name)
            self.env[name] = v
        return v

    def const(self, name: str) -> np.ndarray:
        v = self.env.get(name)
        if not isinstance(v, np.ndarray):
            raise PolyloopError(f"input {name!r} must be a constant (an initializer)")
        return v

    def node(self, n) -> object:
        op, a, b = n.op_type, _attrs(n), self.b
        x = (lambda k: self.value(n.input[k]))
        hint = n.output[0]
        if op in _UNARY:
            return b.emit(_UNARY[op], x(0), name=hint)
        if op in _BINARY:
            return b.emit(_BINARY[op], x(0), x(1), name=hint)
        if op in _IDENTITY:
            return x(0)
        if op == "Constant":
            from onnx import numpy_helper
            return numpy_helper.to_array(a["value"])
        if op == "Conv":
            ins = [x(k) for k in range(len(n.input)) if n.input[k]]
            return b.emit(Op.CONV2D, *ins, stride=tuple(a.get("strides", (1, 1))),
                          padding=_pads(a), dilation=tuple(a.get("dilations", (1, 1))),
                          groups=int(a.get("group", 1)), name=hint)
        if op in ("MaxPool", "AveragePool"):
            if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", (1, 1))):
                raise PolyloopError(f"{op} '{n.name}': ceil_mode and dilations are not supported")
            kernel = tuple(a["kernel_shape"])
            attrs = {"kernel": kernel, "stride": tuple(a.get("strides", kernel)),
                     "padding": _pads(a)}
            if op == "MaxPool":
                return b.emit(Op.MAX_POOL2D, x(0), name=hint, **attrs)
            return b.emit(Op.AVG_POOL2D, x(0), name=hint,
                          count_include_pad=bool(a.get("count_include_pad", 0)), **attrs)
        if op == "GlobalAveragePool":
            return b.emit(Op.ADAPTIVE_AVG_POOL2D, x(0), output_size=(1, 1), name=hint)
        return self.node_more(n, op, a, x, hint)

    def node_more(self, n, op, a, x, hint) -> object:
        b = self.b
        if op == "Gemm":
            if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
                raise PolyloopError(f"Gemm '{n.name}': only alpha = beta = 1 without transA")
            w = self.const(n.input[1])
            w = w if a.get("transB", 0) else w.T.copy()
            ins = [x(0), b.constant(w, n.input[1])] + ([x(2)] if len(n.input) > 2 else [])
            return b.emit(Op.LINEAR, *ins, name=hint)
        if op == "Flatten":
            src = x(0)
            axis = int(a.get("axis", 1))
            rest = int(np.prod(src.type.shape[axis:]))
            return b.emit(Op.RESHAPE, src, shape=tuple(src.type.shape[:axis]) + (rest,), name=hint)
        if op == "Reshape":
            src = x(0)
            return b.emit(Op.RESHAPE, src, shape=_reshape(src, self.const(n.input[1])), name=hint)
        if op in ("Softmax", "LogSoftmax"):
            kind = Op.SOFTMAX if op == "Softmax" else Op.LOG_SOFTMAX
            return b.emit(kind, x(0), axis=int(a.get("axis", -1)), name=hint)
        if op == "Transpose":
            src = x(0)
            perm = a.get("perm", list(reversed(range(len(src.type.shape)))))
            return b.emit(Op.PERMUTE, src, axes=[int(p) for p in perm], name=hint)
        if op == "BatchNormalization":
            return b.emit(Op.BATCH_NORM, *[x(k) for k in range(5)],
                          eps=float(a.get("epsilon", 1e-5)), name=hint)
        if op == "LayerNormalization":
            src = x(0)
            axis = int(a.get("axis", -1)) % len(src.type.shape)
            return b.emit(Op.LAYER_NORM, src, x(1), x(2), ndims=len(src.type.shape) - axis,
                          eps=float(a.get("epsilon", 1e-5)), name=hint)
        if op == "Concat":
            return b.emit(Op.CONCAT, *[x(k) for k in range(len(n.input))],
                          axis=int(a["axis"]), name=hint)
        if op == "ReduceMean":
            axes = a.get("axes") or [int(v) for v in self.const(n.input[1])]
            return b.emit(Op.MEAN, x(0), axes=list(axes), keepdim=bool(a.get("keepdims", 1)),
                          name=hint)
        if op == "Gather" and int(a.get("axis", 0)) == 0:
            return b.emit(Op.EMBEDDING, x(0), x(1), name=hint)
        raise PolyloopError(f"{op} '{n.name}' with attributes {a} is not supported")


def _reshape(src: Value, target: np.ndarray) -> tuple:
    shape = [src.type.shape[k] if int(d) == 0 else int(d) for k, d in enumerate(target)]
    known = [d for d in src.type.shape if isinstance(d, int)]
    total = int(np.prod(known)) if known else 1
    if -1 in shape:
        k = shape.index(-1)
        if isinstance(src.type.shape[0], str) and k == 0:
            shape[0] = src.type.shape[0]
        else:
            others = int(np.prod([d for d in shape if isinstance(d, int) and d != -1]))
            shape[k] = total // others
    return tuple(shape)


def from_onnx(model: object, *, batch: str | None = None) -> Graph:
    """Import an ONNX model (a path or a ``ModelProto``); symbolic input dimensions stay
    symbolic, and ``batch="n"`` makes dimension 0 of every input the size parameter ``n``.

    >>> g = pl.graph.from_onnx("model.onnx"); print(g)   # doctest: +SKIP
    """
    try:
        import onnx
    except ImportError:
        raise PolyloopError("from_onnx needs the onnx package: pip install 'polyloop[graph]'") \
            from None
    if isinstance(model, (str, PathLike)):
        try:
            model = onnx.load(str(model))
        except Exception as e:   # a missing file, a truncated or foreign one: several kinds
            raise PolyloopError(f"cannot read the ONNX model {str(model)!r}: {e}") from None
    nodes = list(model.graph.node)
    bad = [(n.name or f"node {k}", n.op_type, f"node {k}") for k, n in enumerate(nodes)
           if n.op_type not in SUPPORTED]
    if bad:
        raise unsupported_error("ONNX", bad)
    imp = _OnnxImporter(model)
    for inp in model.graph.input:
        if inp.name in imp.env:
            continue
        t = inp.type.tensor_type
        dims = [d.dim_param or int(d.dim_value) for d in t.shape.dim]
        if batch is not None and dims:
            dims[0] = batch
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
        imp.env[inp.name] = imp.b.input(inp.name, tuple(dims), dtype)
    for k, n in enumerate(nodes):
        try:
            imp.env[n.output[0]] = imp.node(n)
        except PolyloopError as e:
            raise PolyloopError(f"ONNX node {k} ({n.op_type} '{n.name}'): {e}") from None
    return imp.b.build(*[imp.value(o.name) for o in model.graph.output])
