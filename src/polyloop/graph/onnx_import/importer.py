# SPDX-License-Identifier: Apache-2.0
"""Import an ONNX model (opsets 7 on) into the graph IR.

The model is checked (``onnx.checker``) and its shapes inferred (``onnx.shape_inference``,
strict) first; then each node goes through the converter of its operator type (a table, per
opset inside each converter) or, for an operator defined as a function of others, through its
function body. Calls whose inputs are all constants are computed at import (shape
arithmetic folds). Every attribute a converter does not read is refused by name, and every
result's shape is compared with ONNX's own inference.
"""
from __future__ import annotations

from collections import deque
from os import PathLike

import numpy as np

from ...errors import PolyloopError
from ..builder import GraphBuilder
from ..ir import Dim, Graph, Value
from ..torch_sizes import SizeNames
from ..verify import verify
from . import (convert_composite, convert_index, convert_math, convert_nn, convert_norm,
               convert_quant, convert_resize, convert_rnn, convert_tensor)
from .qdq import fold_qdq
from .control import branch, unroll_scan
from .fallback import foreign_node, result_types
from .functions import expand, has_function
from .node import ONNX_DTYPES, Node, Shape, ValueNeeded, onnx_dtype

CONVERTERS = {**convert_math.CONVERTERS, **convert_tensor.CONVERTERS, **convert_nn.CONVERTERS,
              **convert_norm.CONVERTERS, **convert_resize.CONVERTERS,
              **convert_composite.CONVERTERS, **convert_rnn.CONVERTERS,
              **convert_index.CONVERTERS, **convert_quant.CONVERTERS}
# operators of other domains that have a converter: (domain, op_type)
CONTRIB_OPS = convert_quant.CONTRIB_OPS
MIN_OPSET = 7
# The largest buffer the graph allocates: offsets are 64-bit, and no address space is larger.
MAX_BYTES = 1 << 62


def _onnx():
    try:
        import onnx
    except ImportError:
        raise PolyloopError("from_onnx needs the onnx package: pip install 'polyloop[graph]'") \
            from None
    return onnx


def load_model(model: object):
    """A ``ModelProto`` from a path, bytes or a ``ModelProto``."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, PathLike)):
        try:
            return onnx.load(str(model))
        except Exception as e:   # a missing file, a truncated or foreign one: several kinds
            raise PolyloopError(f"cannot read the ONNX model {str(model)!r}: {e}") from None
    raise PolyloopError(f"from_onnx takes a path or an onnx.ModelProto, got "
                        f"{type(model).__name__}")


def checked(model):
    """The model after ``onnx.checker`` and strict shape inference (errors become
    PolyloopError with ONNX's message)."""
    onnx = _onnx()
    if not model.graph.node and not model.graph.output:
        raise PolyloopError("the ONNX graph is empty: no nodes and no outputs")
    try:
        onnx.checker.check_model(model)
    except Exception as e:    # ValidationError, or a C++ error for a malformed proto
        raise PolyloopError(f"the model is not valid ONNX: {str(e).strip()}") from None
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception:    # InferenceError, or a C++ error
        # strict inference also fails inside some of ONNX's own function bodies: infer what
        # it can (each result is still compared with polyloop's own shape rules)
        return onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)


def default_opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    raise PolyloopError("the model imports no version of the default ONNX operator set")


def check_size(shape: tuple[Dim, ...], dtype: str, what: str) -> None:
    """Refuse zero-size dimensions and static sizes beyond the address space."""
    if any(isinstance(d, int) and d < 1 for d in shape):
        raise PolyloopError(f"{what} has shape {list(shape)}: a dimension of size 0 (or "
                            "negative); zero-size tensors are not supported")
    total = np.dtype(dtype).itemsize
    for d in shape:
        if isinstance(d, int):
            total *= d
            if total > MAX_BYTES:
                raise PolyloopError(f"{what} of shape {list(shape)} ({dtype}) is larger than "
                                    "the address space")


def _shape_like(shape: tuple[Dim, ...], dtype: str) -> bool:
    """Whether a graph input may be asked for at import: an integer tensor of at most a few
    thousand elements, or a float one of at most 16 (scales, bounds)."""
    if not all(isinstance(d, int) for d in shape):
        return False
    size = int(np.prod(shape, dtype=np.int64))
    return size <= (4096 if dtype in ("int32", "int64", "bool") else 16)


def _label(k: int, proto) -> str:
    name = proto.name or (proto.output[0] if proto.output else "")
    return f"ONNX node {k} ({proto.op_type} '{name}')"


class OnnxImporter:
    """One import (see the module docstring)."""

    def __init__(self, model, *, batch: str | None, values: dict | None) -> None:
        self.model = model
        self.opset = default_opset(model)
        if self.opset < MIN_OPSET:
            raise PolyloopError(f"the model uses opset {self.opset}; opsets {MIN_OPSET} and "
                                "later are supported (convert it with onnx.version_converter)")
        self.b = GraphBuilder(model.graph.name or "model", fold=True)
        self.env: dict[str, Value | Shape] = {}
        self.inferred = {v.name: v.type for v in (*model.graph.value_info,
                                                  *model.graph.output)}
        # the small graph inputs (shapes, bounds, scales) each value is computed from: what
        # ValueNeeded asks for when such a value decides a shape
        self.sources: dict[str, frozenset[str]] = {}
        self._constants(values or {})
        self._inputs(batch)
        params = [p for v in self.env.values() if isinstance(v, Value)
                  for p in v.type.params]
        self.sizes = SizeNames({p: p for p in params}, {})

    def _constants(self, values: dict) -> None:
        from onnx import numpy_helper
        for init in self.model.graph.initializer:
            onnx_dtype(init.data_type, f"initializer '{init.name}'")
            self.env[init.name] = self.b.constant(numpy_helper.to_array(init).copy(), init.name)
        for inp in self.model.graph.input:
            if inp.name in values and inp.name not in self.env:
                arr = np.asarray(values[inp.name])
                dtype = onnx_dtype(inp.type.tensor_type.elem_type, f"input '{inp.name}'")
                self.env[inp.name] = self.b.constant(arr.astype(dtype), inp.name)

    def _inputs(self, batch: str | None) -> None:
        for inp in self.model.graph.input:
            if inp.name in self.env:
                continue
            if inp.type.WhichOneof("value") != "tensor_type":
                raise PolyloopError(f"input '{inp.name}' is a {inp.type.WhichOneof('value')}; "
                                    "only tensors are supported")
            t = inp.type.tensor_type
            dtype = onnx_dtype(t.elem_type, f"input '{inp.name}'")
            if not t.HasField("shape"):
                raise PolyloopError(f"input '{inp.name}' has no shape; give its rank and sizes")
            dims: list[Dim] = []
            for k, d in enumerate(t.shape.dim):
                if d.HasField("dim_value"):
                    dims.append(int(d.dim_value))
                elif d.dim_param:
                    dims.append(d.dim_param)
                else:
                    raise PolyloopError(f"dimension {k} of input '{inp.name}' has neither a "
                                        "size nor a name")
            if batch is not None and dims:
                dims[0] = batch
            if any(d == 0 for d in dims):      # no elements: the value is known, a constant
                self.env[inp.name] = self.b.constant(np.zeros(dims, dtype), inp.name)
                continue
            check_size(tuple(dims), dtype, f"input '{inp.name}'")
            self.env[inp.name] = self.b.input(inp.name, tuple(dims), dtype)
            if _shape_like(tuple(dims), dtype):
                self.sources[inp.name] = frozenset({inp.name})

    # nodes -----------------------------------------------------------------------------------
    def run(self) -> Graph:
        unsupported, blocking = [], False
        for k, proto in enumerate(self.model.graph.node):
            problem = self._support(proto, self.opset)
            if problem and self._foreign(proto):
                problem += " (would run with build(fallback='numpy'))"
            elif problem:
                blocking = True
            if problem:
                unsupported.append(f"  {_label(k, proto)}: {problem}")
        if blocking:
            raise PolyloopError(f"the ONNX model uses {len(unsupported)} unsupported operator "
                                "call(s):\n" + "\n".join(unsupported))
        queue = deque((p, self.opset, _label(k, p)) for k, p in enumerate(self.model.graph.node))
        while queue:
            proto, opset, label = queue.popleft()
            try:
                expanded = self._node(proto, opset, label)
            except ValueNeeded as e:
                raise ValueNeeded(f"{label}: {e}", e.names) from None
            except PolyloopError as e:
                raise PolyloopError(f"{label}: {e}") from None
            if expanded:
                body, opsets = expanded
                inner = opsets.get("", opsets.get("ai.onnx", opset))
                queue.extendleft(reversed([(p, inner, f"{label} > {p.op_type}")
                                           for p in body]))
        outputs = [self._output(o) for o in self.model.graph.output]
        for rule in self.sizes.rules():
            self.b.size_rule(rule)
        graph = _used_sizes_only(self.b.build(*outputs))
        return verify(graph, where="after the ONNX import", rules=True)

    def _support(self, proto, opset: int) -> str | None:
        if (proto.domain, proto.op_type) in CONTRIB_OPS:
            return None
        if proto.domain not in ("", "ai.onnx"):
            return f"operators of domain '{proto.domain}' are not supported"
        if proto.op_type in CONVERTERS or proto.op_type in ("If", "Scan") or \
                has_function(proto.op_type, opset):
            return None
        return "not supported (no converter and no function body)"

    def _foreign(self, proto) -> bool:
        """Whether a node without a converter stays in the graph as a foreign call (run by
        ``build(fallback="numpy")``): ONNX's own operator, results of fixed shapes."""
        return proto.domain in ("", "ai.onnx") and \
            result_types(proto, self.inferred) is not None

    def _node(self, proto, opset: int, label: str = ""):
        """Convert one node into the builder; returns a function body (or the branch an If
        takes) to convert instead."""
        if proto.op_type == "If":
            n = Node(proto, opset, self.b, self.env, self.sources, self.sizes)
            cond = n.array(0, "the condition")
            if cond.size != 1:
                raise PolyloopError(f"the condition has {cond.size} elements, not one")
            return branch(proto, bool(cond.reshape(-1)[0])), {"": opset}
        if proto.op_type == "Scan":
            return unroll_scan(proto, opset, self._shape_of), {"": opset}
        if proto.op_type not in CONVERTERS:
            problem = self._support(proto, opset)
            if problem and self._foreign(proto):
                n = Node(proto, opset, self.b, self.env, self.sources, self.sizes)
                inputs = [n.value(k) for k in range(n.n_inputs) if n.has(k)]
                outs = foreign_node(self.b, proto, opset, inputs,
                                    result_types(proto, self.inferred), label)
                for name, v in zip(proto.output, outs):
                    if name:
                        self._bind(name, v)
                return None
            if problem:
                raise PolyloopError(problem)
            return expand(proto, opset, [self._type_proto(i) for i in proto.input])
        n = Node(proto, opset, self.b, self.env, self.sources, self.sizes)
        result = CONVERTERS[proto.op_type](n)
        unread = n.unread_attributes()
        if unread:
            raise PolyloopError(f"attribute(s) {', '.join(unread)} not supported by polyloop's "
                                f"{proto.op_type} (never ignored: remove them or export "
                                "without them)")
        results = result if isinstance(result, tuple) else (result,)
        sources = frozenset().union(*(self.sources.get(i, frozenset()) for i in proto.input))
        for name in proto.output:
            if name and sources:
                self.sources[name] = sources
        for k, name in enumerate(proto.output):
            if not name:
                continue
            if k >= len(results) or results[k] is None:
                raise PolyloopError(f"output {k} ('{name}') is not supported")
            self._bind(name, results[k])
        return None

    def _bind(self, name: str, entry: Value | Shape) -> None:
        if isinstance(entry, Value):
            if self.b.data(entry) is None:     # an empty constant is fine; empty data is not
                check_size(entry.type.shape, entry.type.dtype, f"the result '{name}'")
            self._compare(name, entry)
        self.env[name] = entry

    def _compare(self, name: str, v: Value) -> None:
        """ONNX's inferred type of ``name`` (when fully known) must be ours."""
        t = self.inferred.get(name)
        if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField(
                "shape"):
            return
        tt = t.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        theirs = ONNX_DTYPES.get(tt.elem_type)
        if theirs is not None and theirs != v.type.dtype:
            raise PolyloopError(f"'{name}': polyloop's dtype {v.type.dtype} differs from "
                                f"ONNX's inferred {theirs}")
        if len(dims) != len(v.type.shape) or any(
                d is not None and isinstance(ours, int) and d != ours
                for d, ours in zip(dims, v.type.shape)):
            raise PolyloopError(f"'{name}': polyloop's shape {list(v.type.shape)} differs from "
                                f"ONNX's inferred {dims}")

    def _shape_of(self, name: str) -> tuple:
        e = self.env.get(name)
        if e is None:
            raise PolyloopError(f"'{name}' is produced by no earlier node")
        return (len(e.dims),) if isinstance(e, Shape) else e.type.shape

    def _type_proto(self, name: str):
        from onnx import TypeProto, helper
        if not name:
            return TypeProto()
        e = self.env[name]
        if isinstance(e, Shape):
            return helper.make_tensor_type_proto(7, [len(e.dims)])
        code = {v: k for k, v in ONNX_DTYPES.items()}[e.type.dtype]
        return helper.make_tensor_type_proto(code, [d if isinstance(d, int) else str(d)
                                                    for d in e.type.shape])

    def _output(self, o) -> Value:
        e = self.env.get(o.name)
        if e is None:
            raise PolyloopError(f"graph output '{o.name}' is produced by no node")
        if isinstance(e, Shape):
            raise PolyloopError(f"graph output '{o.name}' is a shape holding size parameters "
                                f"{e.dims}; return a tensor")
        return e


def _used_sizes_only(g: Graph) -> Graph:
    """``g`` without the derived sizes no value's shape uses (intermediate shape arithmetic:
    its range must not restrict the sizes the model runs at)."""
    values = (*g.inputs, *(v for b in g.bindings for v in b.outputs))
    used = {p for v in values for p in v.type.params}
    rules = tuple(r for r in g.size_rules if not r.terms or r.name in used)
    dropped = {r.name for r in g.size_rules} - {r.name for r in rules}
    return g.replace(size_rules=rules, params=tuple(p for p in g.params if p not in dropped))


def upgraded(model):
    """A model of an opset before ``MIN_OPSET`` converted by ONNX's version converter (the
    older broadcasting and attribute forms become today's)."""
    if default_opset(model) >= MIN_OPSET:
        return model
    from onnx import version_converter
    try:
        return version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:    # the converter's own errors, of several kinds
        raise PolyloopError(f"the model uses opset {default_opset(model)}, and ONNX's version "
                            f"converter cannot bring it to opset {MIN_OPSET}: "
                            f"{str(e).strip()[:300]}") from None


def from_onnx(model: object, *, batch: str | None = None, values: dict | None = None) -> Graph:
    """Import an ONNX model (a path or a ``ModelProto``); symbolic input dimensions
    (``dim_param``) stay symbolic, and ``batch="n"`` makes dimension 0 of every input the
    size parameter ``n``. ``values={"name": array}`` binds graph inputs to constants (an
    input that decides a shape, such as a Reshape's target, must be given so).

    >>> g = pl.graph.from_onnx("model.onnx"); print(g)   # doctest: +SKIP
    """
    m = checked(load_model(model))
    return OnnxImporter(fold_qdq(checked(upgraded(m))), batch=batch, values=values).run()
