# SPDX-License-Identifier: Apache-2.0
"""polyloop as an ONNX backend (``onnx.backend.base.Backend``), so that ONNX's own
``onnx.backend.test.BackendTest`` runs polyloop.

``prepare(model)`` imports the model and compiles it. A graph input that decides a shape
(a Reshape's target given as an input, a Slice's bounds...) cannot be compiled before its
value is known: such a model is compiled at its first ``run``, for the values given there,
and again for each new value (the builds are cached by value).

>>> import numpy as np, onnx
>>> from onnx import helper, TensorProto
>>> from polyloop.graph.onnx_backend import PolyloopBackend
>>> node = helper.make_node("Relu", ["x"], ["y"])
>>> graph = helper.make_graph([node], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
>>> rep = PolyloopBackend.prepare(helper.make_model(graph))
>>> rep.run([np.array([-1.0, 2.0], "float32")])[0]
array([0., 2.], dtype=float32)
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError, PolyloopError
from .build import build
from .builder import clean_name
from .executor import Executor
from .onnx_import import ValueNeeded, from_onnx


def _base():
    try:
        from onnx.backend.base import Backend, BackendRep, namedtupledict
    except ImportError:
        raise PolyloopError("the ONNX backend needs the onnx package: pip install "
                            "'polyloop[graph]'") from None
    return Backend, BackendRep, namedtupledict


Backend, BackendRep, namedtupledict = _base()


class PolyloopRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns the outputs in the model's order."""

    def __init__(self, model) -> None:
        self.model = model
        init = {i.name for i in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in init]
        self.output_names = [o.name for o in model.graph.output]
        self.bound: tuple[str, ...] = ()
        self._builds: dict[bytes, Executor] = {}
        try:
            self._executor({})
        except ValueNeeded as e:
            self.bound = tuple(e.names)

    def _executor(self, values: dict[str, np.ndarray]) -> Executor:
        key = b"".join(k.encode() + b"\0" + np.ascontiguousarray(v).tobytes() + str(
            (v.dtype, v.shape)).encode() for k, v in sorted(values.items()))
        if key not in self._builds:
            self._builds[key] = build(from_onnx(self.model, values=values or None))
        return self._builds[key]

    def _named(self, inputs) -> dict[str, np.ndarray]:
        if isinstance(inputs, dict):
            return {k: np.asarray(v) for k, v in inputs.items()}
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if len(inputs) != len(self.input_names):
            raise ArgumentError(f"the model takes {len(self.input_names)} inputs "
                                f"({', '.join(self.input_names)}), got {len(inputs)}")
        return {k: np.asarray(v) for k, v in zip(self.input_names, inputs)}

    def run(self, inputs, **kwargs):
        named = self._named(inputs)
        while True:
            try:
                ex = self._executor({k: named[k] for k in self.bound})
                break
            except ValueNeeded as e:
                missing = [k for k in e.names if k not in self.bound]
                if not missing or any(k not in named for k in missing):
                    raise
                self.bound += tuple(missing)
        by_name = {clean_name(k): v for k, v in named.items()}
        args = []
        for v in ex.graph.inputs:
            if v.name not in by_name:
                raise ArgumentError(f"input '{v.name}' was not given")
            args.append(by_name[v.name])
        out = ex(*args)
        out = out if isinstance(out, tuple) else (out,)
        return namedtupledict("Outputs", self.output_names)(*out)


class PolyloopBackend(Backend):
    """``prepare``, ``run_model``, ``run_node`` and ``supports_device`` (the CPU)."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> PolyloopRep:
        cls._check_device(device)
        return PolyloopRep(model)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device).run(inputs)

    @classmethod
    def run_node(cls, node, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info=None, **kwargs):
        """Run one node on ``inputs`` (its graph built around it, the inputs' types taken
        from the arrays)."""
        from onnx import helper
        cls._check_device(device)
        present = [name for name in node.input if name]
        arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(present):
            raise ArgumentError(f"node {node.op_type} has {len(present)} inputs, got "
                                f"{len(arrays)}")
        info = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                              a.shape) for name, a in zip(present, arrays)]
        opset = kwargs.get("opset_version")
        outs = [helper.make_value_info(name, t) for name, t in
                _output_types(node, info, opset).items()]
        graph = helper.make_graph([node], f"{node.op_type.lower()}_node", info, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]) \
            if opset else helper.make_model(graph)
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")

    @classmethod
    def _check_device(cls, device: str) -> None:
        if not cls.supports_device(device):
            raise PolyloopError(f"device {device!r}: the polyloop ONNX backend runs on the CPU")


def _output_types(node, info, opset) -> dict:
    """The node's output types from ONNX's shape inference of the node alone."""
    import onnx.defs
    from onnx import shape_inference
    try:
        schema = onnx.defs.get_schema(node.op_type, opset or onnx.defs.onnx_opset_version(),
                                      node.domain)
        types = shape_inference.infer_node_outputs(schema, node,
                                                   {v.name: v.type for v in info})
    except Exception as e:    # onnx's SchemaError or InferenceError
        raise PolyloopError(f"node {node.op_type}: ONNX cannot type its outputs: "
                            f"{str(e).strip()[:300]}") from None
    return {o: types[o] for o in node.output if o and o in types}


prepare = PolyloopBackend.prepare
run_model = PolyloopBackend.run_model
run_node = PolyloopBackend.run_node
supports_device = PolyloopBackend.supports_device
