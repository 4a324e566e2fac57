# SPDX-License-Identifier: Apache-2.0
"""Import a PyTorch module into the graph IR: ``torch.export``, its decompositions to
functional core ATen (no in-place or view-mutating operators; the composites in
``aten.KEEP_WHOLE`` stay whole), then one converter per ATen operator (``graph.aten``).

Calls on constants only (shape arithmetic, masks built with ``arange``, weights rearranged by
the model) are computed at import, by PyTorch. A call without a converter, or one its converter
refuses, stays in the graph as a typed foreign operator (``graph.foreign``): ``build`` refuses
it, listing every one, or runs it through PyTorch with ``fallback="torch"``.
"""
from __future__ import annotations

import numpy as np

from ..errors import PolyloopError
from .aten import ASSERTS, CONVERTERS, KEEP_WHOLE, Call, Unsupported, op_name
from .aten.numpy_refs import NUMPY_REFERENCES
from .builder import GraphBuilder
from .foreign import Reference, unsupported_error
from .ir import Dim, Graph, TensorType, Value
from .passes.dce import remove_dead_code
from .torch_export import export_program
from .torch_qdq import match_layer, pass_quantized
from .torch_sizes import SizeNames

__all__ = ["from_torch", "unsupported_error"]


def where_in_model(node) -> str:
    """The module path and source line of an exported call, for error messages."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    line = trace[-1].strip() if trace else ""
    return ", ".join(p for p in (f"module '{path}'" if path else "", line) if p) or "top level"


class _Slot:
    """A tensor argument of a foreign call: input ``k`` of the call."""

    def __init__(self, k: int, name: str) -> None:
        self.k, self.name = k, name

    def __repr__(self) -> str:
        return f"%{self.name}"


class _Importer:
    def __init__(self, ep, sizes: SizeNames) -> None:
        import torch
        self.torch = torch
        self.ep, self.sizes, self.b = ep, sizes, GraphBuilder("model")
        self.env: dict[str, object] = {}
        # calls whose value is another call's: the ones after a quantized layer, run on its
        # 8-bit result (``torch_qdq``)
        self.aliases: dict[str, str] = {}
        self._constants: dict[int, Value] = {}

    # values -----------------------------------------------------------------------------------
    def resolve(self, a: object) -> object:
        if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "meta"):
            return self.env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.resolve(x) for x in a)
        return a

    def is_constant(self, v: object) -> bool:
        return isinstance(v, self.torch.Tensor)

    def array(self, t) -> np.ndarray:
        return t.detach().cpu().contiguous().numpy()

    def constant_value(self, data: np.ndarray, name: str) -> Value:
        return self.b.constant(data.copy(), name)

    def as_value(self, v: object, dtype: str = "float32") -> Value:
        """``v`` as a graph value: constant tensors become graph constants (once each)."""
        if isinstance(v, Value):
            return v
        if self.is_constant(v):
            if id(v) not in self._constants:
                self._constants[id(v)] = self.constant_value(self.array(v), "const")
            return self._constants[id(v)]
        if isinstance(v, (bool, int, float)):
            return self.b.constant(np.asarray(v, dtype=dtype), "scalar")
        raise PolyloopError(f"cannot use {v!r} as a tensor")

    def result_type(self, args: list) -> str:
        """The dtype PyTorch's type promotion gives for ``args`` (values, constant tensors,
        numbers)."""
        torch = self.torch

        def dummy(a):
            if isinstance(a, Value):
                return torch.empty([1] * len(a.type.shape), dtype=getattr(torch, a.type.dtype))
            return a
        return str(torch.result_type(*[dummy(a) for a in args])).replace("torch.", "") \
            if len(args) == 2 else str(dummy(args[0]).dtype).replace("torch.", "")

    def dim_of(self, d: object) -> Dim:
        return self.sizes.dim(d)

    def tensor_type(self, val) -> TensorType:
        dtype = str(val.dtype).replace("torch.", "")
        return TensorType(tuple(self.dim_of(d) for d in val.shape), dtype)

    def result_types(self, node) -> list[TensorType | None]:
        val = node.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        return [self.tensor_type(v) if isinstance(v, self.torch.Tensor) else None for v in vals]

    # calls ------------------------------------------------------------------------------------
    def _has_values(self, a: object) -> bool:
        if isinstance(a, (Value, str)):
            return True
        if isinstance(a, (list, tuple)):
            return any(self._has_values(x) for x in a)
        if isinstance(a, dict):
            return any(self._has_values(x) for x in a.values())
        return False

    def call(self, node) -> object:
        if node.name in self.aliases:
            return self.env[self.aliases[node.name]]
        name = op_name(node)
        val = node.meta.get("val")
        if name == "getitem":
            return self.resolve(node.args[0])[node.args[1]]
        if isinstance(val, (bool, self.torch.SymBool)):
            return None     # a condition on sizes, read from its assertion by export_program
        if isinstance(val, (int, self.torch.SymInt)):
            return self.dim_of(val)
        if name in ASSERTS:
            return None
        args, kwargs = self.resolve(node.args), self.resolve(node.kwargs)
        if not self._has_values((args, kwargs)):
            with self.torch.no_grad():
                return node.target(*args, **kwargs)
        layer = match_layer(self, node)
        quantized = layer.emit(self, node) if layer is not None else None
        if quantized is not None:
            return quantized
        converter = CONVERTERS.get(name)
        if converter is None:
            return self.foreign(node, args, kwargs, "no converter for this operator")
        passed = pass_quantized(self, node, lambda n: converter(Call(self, n)))
        if passed is not None:
            return passed
        try:
            return converter(Call(self, node))
        except Unsupported as e:
            return self.foreign(node, args, kwargs, str(e))

    def foreign(self, node, args, kwargs, reason: str) -> object:
        """Keep ``node`` as a typed foreign call run by PyTorch under ``fallback="torch"``, and
        by NumPy under ``fallback="numpy"`` where ``aten.numpy_refs`` has the operator."""
        types = self.result_types(node)
        if any(t is None for t in types):
            raise PolyloopError(f"{node.name} = {node.target}: {reason}, and its results are "
                                "not all tensors, so it cannot run as a fallback either")
        inputs: list[Value] = []

        def template(a: object) -> object:
            if isinstance(a, Value) or self.is_constant(a):
                inputs.append(self.as_value(a))
                return _Slot(len(inputs) - 1, inputs[-1].name)
            if isinstance(a, str):
                raise PolyloopError(f"{node.name} = {node.target}: {reason}, and it takes a "
                                    f"symbolic size ({a}); it cannot run as a fallback")
            if isinstance(a, (list, tuple)):
                return type(a)(template(x) for x in a)
            return a
        targs = template(tuple(args))
        tkwargs = {k: template(v) for k, v in kwargs.items()}
        torch, target, several = self.torch, node.target, isinstance(node.meta["val"], (list, tuple))

        def fill(a, arrays):
            if isinstance(a, _Slot):
                return torch.from_numpy(np.ascontiguousarray(arrays[a.k]))
            if isinstance(a, (list, tuple)):
                return type(a)(fill(x, arrays) for x in a)
            return a

        def run_torch(*arrays):
            with torch.no_grad():
                out = target(*fill(targs, arrays), **{k: fill(v, arrays) for k, v in tkwargs.items()})
            outs = out if isinstance(out, (list, tuple)) else (out,)
            return tuple(o.detach().numpy() for o in outs)
        impls = {"torch": run_torch}
        numpy_ref = NUMPY_REFERENCES.get(op_name(node))
        if numpy_ref is not None:
            impls["numpy"] = _numpy_call(numpy_ref, node, targs, tkwargs)
        shown = ", ".join([repr(a) for a in targs] + [f"{k}={v!r}" for k, v in tkwargs.items()])
        ref = Reference(str(target), f"{target}({shown})", reason, where_in_model(node), impls)
        outs = self.b.emit_foreign(ref, tuple(inputs), tuple(types), name=node.name)
        return outs if several else outs[0]

    def output(self, a: object) -> Value:
        if isinstance(a, Value):
            return a
        if self.is_constant(a):
            return self.as_value(a)
        raise PolyloopError(f"a model output is {a!r}, not a tensor")


def _numpy_call(ref, node, targs: tuple, tkwargs: dict):
    """``ref`` (a NumPy reference) called with the foreign call's arguments by schema name."""
    names = [a.name for a in node.target._schema.arguments]

    def fill(a, arrays):
        if isinstance(a, _Slot):
            return arrays[a.k]
        if isinstance(a, (list, tuple)):
            return type(a)(fill(x, arrays) for x in a)
        return a

    def run_numpy(*arrays):
        named = {names[k]: fill(a, arrays) for k, a in enumerate(targs)}
        named.update({k: fill(v, arrays) for k, v in tkwargs.items()})
        return ref(**named)
    return run_numpy


def _bind_inputs(imp: _Importer, ep) -> None:
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    for spec in ep.graph_signature.input_specs:
        node = placeholders[spec.arg.name]
        if spec.kind.name == "USER_INPUT":
            t = imp.tensor_type(node.meta["val"])
            imp.env[node.name] = imp.b.input(node.name, t.shape, t.dtype)
        else:
            imp.env[node.name] = state[spec.target].detach()


def from_torch(module, example_inputs, *, batch: str | None = None,
               dynamic: dict | None = None) -> Graph:
    """Import ``module`` (in eval mode) traced on ``example_inputs`` with ``torch.export``.

    ``batch="n"`` makes dimension 0 of every input a size parameter; ``dynamic`` names the
    dimensions that may vary, per input (the names of ``forward``'s parameters):
    ``dynamic={"x": {0: "batch", 1: "seq"}}``. The model then runs at any such size (sizes
    are checked at call time). Weights become constants (copied). Calls with no conversion
    stay in the graph as foreign operators (see ``pl.graph.build``'s ``fallback``). A model
    quantized with PyTorch's PT2E flow (``convert_pt2e``) runs its quantized convolutions and
    linear layers as integer kernels (``graph.torch_qdq``).

    >>> import torch, polyloop as pl
    >>> g = pl.graph.from_torch(torch.nn.ReLU(), (torch.randn(2, 3),))
    >>> print(g.outputs[0].type)
    float32[2, 3]
    """
    ep, sizes = export_program(module, tuple(example_inputs), batch=batch, dynamic=dynamic,
                               keep_whole=KEEP_WHOLE)
    imp = _Importer(ep, sizes)
    _bind_inputs(imp, ep)
    outputs: list[Value] = []
    for n in ep.graph.nodes:
        if n.op == "call_function":
            try:
                imp.env[n.name] = imp.call(n)
            except PolyloopError as e:
                raise PolyloopError(f"importing {n.name} = {n.target} "
                                    f"({where_in_model(n)}): {e}") from None
        elif n.op == "output":
            outputs = [imp.output(imp.resolve(a)) for a in n.args[0] if a is not None]
    for rule in sizes.rules():
        imp.b.size_rule(rule)
    g = imp.b.build(*outputs)
    return remove_dead_code(g) if imp.aliases else g
