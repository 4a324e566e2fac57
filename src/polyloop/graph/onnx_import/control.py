# SPDX-License-Identifier: Apache-2.0
"""ONNX control flow the importer can resolve at import: an ``If`` whose condition is known
becomes the branch it takes; a ``Scan`` over a constant number of iterations is unrolled
into its body's nodes once per iteration. Both produce ordinary ONNX nodes, converted like
the model's own."""
from __future__ import annotations

import itertools

import numpy as np

from ...errors import PolyloopError
from .functions import renamed_copy

_COUNTER = itertools.count()


def _graph_attr(node, key: str):
    g = next((a.g for a in node.attribute if a.name == key), None)
    if g is None:
        raise PolyloopError(f"{node.op_type} has no attribute {key}")
    return g


def branch(node, cond: bool) -> list:
    """The nodes of the branch of If ``node`` that ``cond`` takes, then an Identity per
    output (the branch's result under the If's output name)."""
    from onnx import helper
    key = "then_branch" if cond else "else_branch"
    g = _graph_attr(node, key)
    if len(g.output) != len(node.output):
        raise PolyloopError(f"the {key} has {len(g.output)} outputs, the If {len(node.output)}")
    body = [helper.make_node("Constant", [], [t.name], value=t) for t in g.initializer]
    body += list(g.node)
    body += [helper.make_node("Identity", [o.name], [name])
             for o, name in zip(g.output, node.output) if name]
    return body


def _ints_attr(node, key: str, count: int) -> list[int]:
    a = next((a for a in node.attribute if a.name == key), None)
    values = [int(v) for v in a.ints] if a is not None else []
    return values + [0] * (count - len(values))


def _copy(node, rename, prefix: str):
    if any(a.HasField("g") or a.graphs for a in node.attribute):
        raise PolyloopError(f"a Scan body holding a subgraph ({node.op_type}) is not supported")
    return renamed_copy(node, rename, prefix)


def unroll_scan(node, opset: int, shape_of) -> list:
    """Scan ``node`` as nodes: each iteration's slices of the scan inputs (Gather), a renamed
    copy of the body, then the scan outputs stacked (Unsqueeze, Concat) and the last states
    (Identity). ``shape_of(name)`` gives an input's shape."""
    from onnx import helper
    if opset < 9:
        raise PolyloopError("Scan before opset 9 (with a batch axis) is not supported")
    body = _graph_attr(node, "body")
    m = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), None)
    if not m:
        raise PolyloopError("Scan needs num_scan_inputs")
    n_state = len(node.input) - m
    k_out = len(body.output) - n_state
    in_axes = _ints_attr(node, "scan_input_axes", m)
    in_dirs = _ints_attr(node, "scan_input_directions", m)
    out_axes = _ints_attr(node, "scan_output_axes", k_out)
    out_dirs = _ints_attr(node, "scan_output_directions", k_out)
    scans = list(node.input[n_state:])
    lengths = set()
    for name, axis in zip(scans, in_axes):
        shape = shape_of(name)
        d = shape[axis % len(shape)]
        if not isinstance(d, int):
            raise PolyloopError(f"the scanned axis of '{name}' is symbolic ({d}); Scan is "
                                "unrolled over a constant number of iterations")
        lengths.add(d)
    if len(lengths) != 1:
        raise PolyloopError(f"the scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    tag = f"_scan{next(_COUNTER)}_"
    inner = {i.name for i in body.input} | {o for n in body.node for o in n.output} | \
        {t.name for t in body.initializer}
    nodes, states = [], list(node.input[:n_state])
    collected: list[list[str]] = [[] for _ in range(k_out)]
    for t in range(steps):
        prefix = f"{tag}{t}_"
        names = {b.name: s for b, s in zip(body.input, states)}
        for j, (src, axis, d) in enumerate(zip(scans, in_axes, in_dirs)):
            index, sliced = f"{prefix}index{j}", f"{prefix}slice{j}"
            pos = steps - 1 - t if d else t
            nodes.append(helper.make_node("Constant", [], [index],
                                          value=helper.make_tensor(index, 7, [], [pos])))
            nodes.append(helper.make_node("Gather", [src, index], [sliced], axis=axis))
            names[body.input[n_state + j].name] = sliced

        def rename(name: str, names=names, prefix=prefix) -> str:
            if name in names:
                return names[name]
            return prefix + name if name in inner else name
        nodes += [helper.make_node("Constant", [], [rename(c.name)], value=c)
                  for c in body.initializer]
        nodes += [_copy(b, rename, prefix) for b in body.node]
        states = [rename(o.name) for o in body.output[:n_state]]
        for k, o in enumerate(body.output[n_state:]):
            collected[k].append(rename(o.name))
    for k, parts in enumerate(collected):
        target = node.output[n_state + k] if n_state + k < len(node.output) else ""
        if not target:
            continue
        if out_dirs[k]:
            parts = parts[::-1]
        nodes += _stack(helper, parts, out_axes[k], target, f"{tag}out{k}_", opset)
    nodes += [helper.make_node("Identity", [s], [o]) for s, o in zip(states, node.output)
              if o]
    return nodes


def _stack(helper, parts: list[str], axis: int, target: str, prefix: str, opset: int) -> list:
    """Nodes stacking ``parts`` along a new ``axis`` into ``target``."""
    nodes, grown = [], []
    for k, p in enumerate(parts):
        out = f"{prefix}{k}"
        if opset >= 13:
            axes = f"{prefix}axes"
            if k == 0:
                nodes.append(helper.make_node("Constant", [], [axes], value=helper.make_tensor(
                    axes, 7, [1], np.array([axis], "int64"))))
            nodes.append(helper.make_node("Unsqueeze", [p, axes], [out]))
        else:
            nodes.append(helper.make_node("Unsqueeze", [p], [out], axes=[axis]))
        grown.append(out)
    nodes.append(helper.make_node("Concat", grown, [target], axis=axis))
    return nodes
