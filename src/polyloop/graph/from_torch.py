# SPDX-License-Identifier: Apache-2.0
"""Import a PyTorch module through ``torch.export`` (ATen operators) into the graph IR."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import PolyloopError
from .builder import GraphBuilder
from .ir import Graph, Op, Value

_UNARY = {"relu": Op.RELU, "sigmoid": Op.SIGMOID, "tanh": Op.TANH, "exp": Op.EXP,
          "sqrt": Op.SQRT, "neg": Op.NEG}
_BINARY = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "div": Op.DIV}
_VIEWS = {"view", "reshape", "_unsafe_view", "flatten", "unflatten", "squeeze", "unsqueeze",
          "contiguous", "clone", "dropout", "alias", "detach", "expand_as"}


def _pair(v: object) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[-1])) if v else (1, 1)
    return int(v), int(v)


def _op_name(node) -> str:
    if node.target is operator.getitem:
        return "getitem"
    name = getattr(node.target, "__name__", str(node.target))
    return name.split(".")[0]


class _Importer:
    def __init__(self, ep, batch: str | None, example_batch: int | None) -> None:
        self.ep, self.b = ep, GraphBuilder("model")
        self.env: dict[str, object] = {}
        self.batch, self.example_batch = batch, example_batch

    def arg(self, a: object) -> object:
        if hasattr(a, "name") and hasattr(a, "op"):
            return self.env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def tensor(self, a: object) -> Value:
        v = self.arg(a)
        if isinstance(v, Value):
            return v
        return self.b.constant(np.asarray(v, dtype=np.float32), "scalar")

    def meta_shape(self, node) -> tuple:
        shape = [int(d) for d in node.meta["val"].shape]
        if self.batch is not None and shape and shape[0] == self.example_batch:
            shape[0] = self.batch
        return tuple(shape)

    def call(self, node) -> object:
        name, b = _op_name(node), self.b
        args, kw = node.args, dict(node.kwargs)
        x = (lambda k: self.tensor(args[k]))
        hint = node.name
        if name == "getitem":
            return self.arg(args[0])[args[1]]
        if name in _VIEWS:
            src = x(0)
            return b.emit(Op.RESHAPE, src, shape=self.meta_shape(node), name=hint)
        if name in _UNARY:
            return b.emit(_UNARY[name], x(0), name=hint)
        if name in _BINARY:
            other = x(1)
            alpha = kw.get("alpha", args[2] if len(args) > 2 else 1)
            if alpha != 1:
                other = b.emit(Op.MUL, other, b.constant(np.float32(alpha), "alpha"))
            return b.emit(_BINARY[name], x(0), other, name=hint)
        return self.call_nn(name, node, args, kw, x, hint)

    def call_nn(self, name, node, args, kw, x, hint) -> object:
        b = self.b
        get = (lambda k, key, d: kw.get(key, args[k] if len(args) > k else d))
        if name == "conv2d":
            ins = [x(0), x(1)] + ([x(2)] if get(2, "bias", None) is not None else [])
            return b.emit(Op.CONV2D, *ins, stride=_pair(get(3, "stride", 1)),
                          padding=_pair(get(4, "padding", 0)),
                          dilation=_pair(get(5, "dilation", 1)), groups=int(get(6, "groups", 1)),
                          name=hint)
        if name == "linear":
            ins = [x(0), x(1)] + ([x(2)] if get(2, "bias", None) is not None else [])
            return b.emit(Op.LINEAR, *ins, name=hint)
        if name in ("matmul", "mm", "bmm"):
            return b.emit(Op.MATMUL, x(0), x(1), name=hint)
        if name == "gelu":
            tanh = get(1, "approximate", "none") == "tanh"
            return b.emit(Op.GELU_TANH if tanh else Op.GELU, x(0), name=hint)
        if name in ("max_pool2d", "avg_pool2d"):
            kernel = _pair(args[1])
            stride = _pair(get(2, "stride", None) or kernel)
            attrs = {"kernel": kernel, "stride": stride, "padding": _pair(get(3, "padding", 0))}
            if name == "max_pool2d":
                if _pair(get(4, "dilation", 1)) != (1, 1) or get(5, "ceil_mode", False):
                    raise PolyloopError(f"{hint}: max_pool2d with dilation or ceil_mode")
                return b.emit(Op.MAX_POOL2D, x(0), name=hint, **attrs)
            if get(4, "ceil_mode", False) or get(6, "divisor_override", None):
                raise PolyloopError(f"{hint}: avg_pool2d with ceil_mode or divisor_override")
            return b.emit(Op.AVG_POOL2D, x(0), name=hint,
                          count_include_pad=bool(get(5, "count_include_pad", True)), **attrs)
        if name == "adaptive_avg_pool2d":
            return b.emit(Op.ADAPTIVE_AVG_POOL2D, x(0), output_size=_pair(args[1]), name=hint)
        if name in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
            op = Op.LOG_SOFTMAX if "log" in name else Op.SOFTMAX
            return b.emit(op, x(0), axis=int(args[1]), name=hint)
        if name in ("permute", "transpose", "t"):
            src = x(0)
            nd = len(src.type.shape)
            if name == "permute":
                axes = [int(a) % nd for a in args[1]]
            else:
                d0, d1 = (int(args[1]) % nd, int(args[2]) % nd) if name == "transpose" else (0, 1)
                axes = list(range(nd))
                axes[d0], axes[d1] = axes[d1], axes[d0]
            return b.emit(Op.PERMUTE, src, axes=axes, name=hint)
        return self.call_norm(name, node, args, kw, x, hint, get)

    def call_norm(self, name, node, args, kw, x, hint, get) -> object:
        b = self.b
        if name in ("batch_norm", "_native_batch_norm_legit_no_training"):
            eps = float(get(7 if name == "batch_norm" else 6, "eps", 1e-5))
            out = b.emit(Op.BATCH_NORM, x(0), x(1), x(2), x(3), x(4), eps=eps, name=hint)
            return out if name == "batch_norm" else (out, None, None)
        if name == "layer_norm":
            return b.emit(Op.LAYER_NORM, x(0), x(2), x(3), ndims=len(args[1]),
                          eps=float(get(4, "eps", 1e-5)), name=hint)
        if name == "mean":
            dims = args[1] if len(args) > 1 else list(range(len(x(0).type.shape)))
            return b.emit(Op.MEAN, x(0), axes=[int(d) for d in dims],
                          keepdim=bool(get(2, "keepdim", False)), name=hint)
        if name == "embedding":
            return b.emit(Op.EMBEDDING, x(0), x(1), name=hint)
        if name == "scaled_dot_product_attention":
            if get(3, "attn_mask", None) is not None:
                raise PolyloopError(f"{hint}: scaled_dot_product_attention with attn_mask")
            return b.emit(Op.ATTENTION, x(0), x(1), x(2), causal=bool(get(5, "is_causal", False)),
                          scale=get(6, "scale", None), name=hint)
        if name == "cat":
            return b.emit(Op.CONCAT, *[self.tensor(t) for t in args[0]],
                          axis=int(get(1, "dim", 0)), name=hint)
        if name == "unbind":
            src, axis = x(0), int(get(1, "dim", 0))
            return tuple(b.emit(Op.SELECT, src, axis=axis, index=k, name=f"{hint}_{k}")
                         for k in range(src.type.shape[axis]))
        if name == "select":
            return b.emit(Op.SELECT, x(0), axis=int(args[1]), index=int(args[2]), name=hint)
        raise KeyError(name)


SUPPORTED = (set(_UNARY) | set(_BINARY) | _VIEWS | {
    "getitem", "conv2d", "linear", "matmul", "mm", "bmm", "gelu", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "softmax", "_softmax", "log_softmax", "_log_softmax", "permute",
    "transpose", "t", "batch_norm", "_native_batch_norm_legit_no_training", "layer_norm",
    "mean", "embedding", "scaled_dot_product_attention", "cat", "select", "unbind"})


def _where(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    line = trace[-2].strip() if len(trace) >= 2 else ""
    return ", ".join(p for p in (f"module '{path}'" if path else "", line) if p) or "top level"


def unsupported_error(kind: str, items: list[tuple[str, str, str]]) -> PolyloopError:
    lines = [f"  {name}: {op} ({where})" for name, op, where in items]
    return PolyloopError(f"the {kind} model uses {len(items)} unsupported operator call(s):\n"
                         + "\n".join(lines) + "\nreplace them in the model, or route them to "
                         "Python with pl.graph.register_extern('env.<op>', fn) where an operator "
                         "of the graph IR matches")


def from_torch(module, example_inputs, *, batch: str | None = None) -> Graph:
    """Import ``module`` (in eval mode) traced on ``example_inputs`` with ``torch.export``.

    ``batch="n"`` makes dimension 0 of every input a size parameter (the model then runs at any
    batch size). Weights become constants (copied).

    >>> import torch, polyloop as pl
    >>> g = pl.graph.from_torch(torch.nn.ReLU(), (torch.randn(2, 3),))
    >>> print(g.outputs[0].type)
    float32[2, 3]
    """
    try:
        import torch
    except ImportError:
        raise PolyloopError("from_torch needs PyTorch: pip install 'polyloop[graph]'") from None
    module = module.eval()
    with torch.no_grad():
        ep = torch.export.export(module, tuple(example_inputs))
    nodes = list(ep.graph.nodes)
    bad = [(n.name, str(n.target), _where(n)) for n in nodes
           if n.op == "call_function" and _op_name(n) not in SUPPORTED]
    if bad:
        raise unsupported_error("PyTorch", bad)
    example_batch = int(example_inputs[0].shape[0]) if batch and example_inputs else None
    imp = _Importer(ep, batch, example_batch)
    _bind_inputs(imp, ep, batch)
    outputs = []
    for n in nodes:
        if n.op == "call_function":
            imp.env[n.name] = imp.call(n)
        elif n.op == "output":
            outputs = [imp.env[a.name] for a in n.args[0]]
    return imp.b.build(*outputs)


def _bind_inputs(imp: _Importer, ep, batch: str | None) -> None:
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    for spec in ep.graph_signature.input_specs:
        name = spec.arg.name
        node = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == name)
        if spec.kind.name == "USER_INPUT":
            val = node.meta["val"]
            shape = tuple(int(d) for d in val.shape)
            if batch is not None and shape:
                shape = (batch,) + shape[1:]
            dtype = str(val.dtype).replace("torch.", "")
            imp.env[name] = imp.b.input(name, shape, dtype)
        else:
            data = state[spec.target].detach().cpu().numpy()
            imp.env[name] = imp.b.constant(data.copy(), spec.target)
