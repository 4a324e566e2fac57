# SPDX-License-Identifier: Apache-2.0
"""An ONNX operator without a converter of its own, whose schema defines it as a function of
other operators (Attention, RMSNormalization, SoftmaxCrossEntropyLoss, Swish, ...), is
replaced by that function body: ONNX's own definition, inlined with the node's inputs,
outputs and attributes."""
from __future__ import annotations

import itertools

from ...errors import PolyloopError

_COUNTER = itertools.count()


def _schema(op_type: str, opset: int, domain: str):
    import onnx.defs
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None


def has_function(op_type: str, opset: int, domain: str = "") -> bool:
    """Whether the operator's schema at ``opset`` defines it as a function."""
    s = _schema(op_type, opset, domain)
    return s is not None and bool(s.function_opset_versions
                                  or s.context_dependent_function_opset_versions)


def _with_defaults(node, schema):
    """A copy of ``node`` with the schema's default attribute values filled in."""
    from onnx import NodeProto
    full = NodeProto()
    full.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value.name:
            full.attribute.append(attr.default_value)
    return full


def _function_proto(node, schema, opset: int, input_types: list):
    from onnx import FunctionProto
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    best = max(plain + dependent, default=None)
    if best is None:
        return None
    if best in dependent:
        raw = schema.get_context_dependent_function_with_opset_version(
            best, node.SerializeToString(), [t.SerializeToString() for t in input_types])
    else:
        raw = schema.get_function_with_opset_version(best)
    f = FunctionProto()
    f.ParseFromString(raw)
    return f


def expand(node, opset: int, input_types: list) -> tuple[list, dict[str, int]]:
    """The body of ``node``'s function (its nodes renamed into the caller's graph) and the
    opsets the body imports."""
    schema = _schema(node.op_type, opset, node.domain)
    if schema is None:
        raise PolyloopError(f"no schema for {node.op_type} at opset {opset}")
    full = _with_defaults(node, schema)
    f = _function_proto(full, schema, opset, input_types)
    if f is None:
        raise PolyloopError(f"{node.op_type} at opset {opset} has no function body")
    prefix = f"_{node.op_type}{next(_COUNTER)}_"
    names = {formal: (node.input[k] if k < len(node.input) else "")
             for k, formal in enumerate(f.input)}
    names.update({formal: node.output[k] for k, formal in enumerate(f.output)
                  if k < len(node.output) and node.output[k]})
    attrs = {a.name: a for a in full.attribute}
    body = [_renamed(inner, names, prefix, attrs) for inner in f.node]
    opsets = {o.domain or "": o.version for o in f.opset_import}
    return body, opsets


def renamed_copy(node, rename, prefix: str):
    """A copy of ``node`` whose inputs and outputs are ``rename``d, named ``prefix`` + its
    name (or operator): how an inlined body's nodes enter the caller's graph."""
    from onnx import NodeProto
    out = NodeProto()
    out.CopyFrom(node)
    del out.input[:]
    del out.output[:]
    out.input.extend(rename(i) for i in node.input)
    out.output.extend(rename(o) for o in node.output)
    out.name = prefix + (node.name or node.op_type)
    return out


def _renamed(inner, names: dict[str, str], prefix: str, attrs: dict):
    def rename(name: str) -> str:
        if name in names:
            return names[name]
        return prefix + name if name else ""
    out = renamed_copy(inner, rename, prefix)
    del out.attribute[:]
    for a in inner.attribute:
        if a.ref_attr_name:
            given = attrs.get(a.ref_attr_name)
            if given is None:
                continue
            copy = type(a)()
            copy.CopyFrom(given)
            copy.name = a.name
            out.attribute.append(copy)
        elif a.graphs:
            raise PolyloopError(f"the function body of this operator has a list of subgraphs "
                                f"({inner.op_type}); control flow is not supported")
        elif a.HasField("g"):
            copy = type(a)()
            copy.CopyFrom(a)
            _rename_graph(copy.g, rename, prefix, attrs)
            out.attribute.append(copy)
        else:
            out.attribute.append(a)
    return out


def _rename_graph(g, rename, prefix: str, attrs: dict) -> None:
    """Rename every value of subgraph ``g`` (a branch of If) in place, as its function's."""
    nodes = [_renamed(n, {}, prefix, attrs) for n in g.node]
    for n in nodes:      # outer names keep the caller's mapping, inner ones get the prefix
        del n.input[:]
    for new, old in zip(nodes, g.node):
        new.input.extend(rename(i) for i in old.input)
        del new.output[:]
        new.output.extend(rename(o) for o in old.output)
    del g.node[:]
    g.node.extend(nodes)
    for v in (*g.input, *g.output, *g.value_info):
        v.name = rename(v.name)
    for t in g.initializer:
        t.name = rename(t.name)
