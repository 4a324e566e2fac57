# SPDX-License-Identifier: Apache-2.0
"""ONNX RNN, GRU and LSTM, unrolled over their (constant) sequence length into the general
graph operators: the input projection of every step is one matrix product, then each step
is a product with the recurrence weights and its gates' elementwise math. Sequence lengths
per batch entry mask the steps past them (the state is kept, the output is 0)."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import BinaryFn, UnaryFn
from .convert_nn import matmul
from .convert_tensor import reshape, slice_axis
from .node import Node

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_PLAIN = {"Sigmoid": UnaryFn.SIGMOID, "Tanh": UnaryFn.TANH, "Relu": UnaryFn.RELU,
          "Softsign": UnaryFn.SOFTSIGN, "Softplus": UnaryFn.SOFTPLUS}
_ALPHA = {"LeakyRelu": (UnaryFn.LEAKY_RELU, 0.01), "ThresholdedRelu":
          (UnaryFn.THRESHOLDED_RELU, 1.0), "Elu": (UnaryFn.ELU, 1.0)}


class _Cell:
    """The pieces of one direction: weights split per gate, biases, activations."""

    def __init__(self, n: Node, direction: int, hidden: int, acts: list) -> None:
        self.n, self.hidden, self.acts = n, hidden, acts
        gates = _GATES[n.op_type]
        w = reshape(n, slice_axis(n, n.value(1), 0, direction, 1), n.value(1).type.shape[1:])
        r = reshape(n, slice_axis(n, n.value(2), 0, direction, 1), n.value(2).type.shape[1:])
        self.w_t = n.emit(Op.PERMUTE, w, axes=[1, 0])          # (input, gates * hidden)
        self.r = [n.emit(Op.PERMUTE, slice_axis(n, r, 0, g * hidden, hidden), axes=[1, 0])
                  for g in range(gates)]                        # each (hidden, hidden)
        self.wb = self.rb = None
        if n.has(3):
            b = reshape(n, slice_axis(n, n.value(3), 0, direction, 1), (2 * gates * hidden,))
            self.wb = slice_axis(n, b, 0, 0, gates * hidden)
            self.rb = [slice_axis(n, b, 0, (gates + g) * hidden, hidden) for g in range(gates)]
        self.peep = None
        if n.op_type == "LSTM" and n.has(7):
            p = reshape(n, slice_axis(n, n.value(7), 0, direction, 1), (3 * hidden,))
            self.peep = [slice_axis(n, p, 0, k * hidden, hidden) for k in range(3)]

    def act(self, k: int, v: Value) -> Value:
        name, alpha, beta = self.acts[k]
        n = self.n
        if name in _PLAIN:
            return n.emit(Op.UNARY, v, fn=_PLAIN[name])
        if name in _ALPHA:
            fn, default = _ALPHA[name]
            return n.emit(Op.UNARY, v, fn=fn, alpha=default if alpha is None else alpha)
        if name == "HardSigmoid":
            return n.emit(Op.UNARY, v, fn=UnaryFn.HARD_SIGMOID,
                          alpha=0.2 if alpha is None else alpha,
                          beta=0.5 if beta is None else beta)
        scale = _scalar(n, v, 1.0 if alpha is None else alpha)
        if name == "Affine":
            return _add(n, _mul(n, v, scale), _scalar(n, v, 0.0 if beta is None else beta))
        if name == "ScaledTanh":
            inner = _mul(n, v, _scalar(n, v, 1.0 if beta is None else beta))
            return _mul(n, n.emit(Op.UNARY, inner, fn=UnaryFn.TANH), scale)
        raise PolyloopError(f"activation {name!r} is not supported")


def _scalar(n: Node, like: Value, v: float) -> Value:
    return n.const(np.array(v, like.type.dtype))


def _add(n: Node, a: Value, b: Value) -> Value:
    return n.emit(Op.BINARY, a, b, fn=BinaryFn.ADD)


def _mul(n: Node, a: Value, b: Value) -> Value:
    return n.emit(Op.BINARY, a, b, fn=BinaryFn.MUL)


def _activations(n: Node, directions: int) -> list[list]:
    names = n.attr("activations") or _DEFAULTS[n.op_type] * directions
    alphas, betas = list(n.attr("activation_alpha") or []), list(n.attr("activation_beta") or [])
    per = len(_DEFAULTS[n.op_type])
    if len(names) != per * directions:
        raise PolyloopError(f"activations {names} need {per} per direction")
    out, ka, kb = [], 0, 0
    for name in names:
        uses = name in _ALPHA or name in ("HardSigmoid", "Affine", "ScaledTanh")
        alpha = alphas[ka] if uses and ka < len(alphas) else None
        beta = betas[kb] if name in ("HardSigmoid", "Affine", "ScaledTanh") and kb < len(betas) \
            else None
        ka, kb = ka + (alpha is not None), kb + (beta is not None)
        out.append((name, alpha, beta))
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def _step(cell: _Cell, x_proj: Value, h: Value, c: Value | None, clip: float | None):
    """One step of one direction: the new hidden state (and cell state)."""
    n, hd = cell.n, cell.hidden
    gates = _GATES[n.op_type]

    def pre(g: int, state: Value, with_recurrence: bool = True) -> Value:
        v = slice_axis(n, x_proj, 1, g * hd, hd)
        if with_recurrence:
            v = _add(n, v, matmul(n, state, cell.r[g]))
            if cell.rb is not None:
                v = _add(n, v, cell.rb[g])
        return v

    def clipped(v: Value) -> Value:
        return v if clip is None else n.emit(Op.UNARY, v, fn=UnaryFn.CLIP, lo=-clip, hi=clip)
    if n.op_type == "RNN":
        return cell.act(0, clipped(pre(0, h))), None
    if n.op_type == "GRU":
        z = cell.act(0, clipped(pre(0, h)))
        r = cell.act(0, clipped(pre(1, h)))
        if n.flag("linear_before_reset", 0):
            rec = matmul(n, h, cell.r[2])
            if cell.rb is not None:
                rec = _add(n, rec, cell.rb[2])
            cand = _add(n, pre(2, h, False), _mul(n, r, rec))
        else:
            cand = pre(2, _mul(n, r, h))
        cand = cell.act(1, clipped(cand))
        one = _scalar(n, h, 1.0)
        keep = n.emit(Op.BINARY, one, z, fn=BinaryFn.SUB)
        return _add(n, _mul(n, keep, cand), _mul(n, z, h)), None
    i_pre, o_pre, f_pre, c_pre = (pre(g, h) for g in range(gates))
    if cell.peep is not None:
        i_pre = _add(n, i_pre, _mul(n, cell.peep[0], c))
        f_pre = _add(n, f_pre, _mul(n, cell.peep[2], c))
    i = cell.act(0, clipped(i_pre))
    f = cell.act(0, clipped(f_pre))
    if n.flag("input_forget", 0):
        f = n.emit(Op.BINARY, _scalar(n, i, 1.0), i, fn=BinaryFn.SUB)
    c_new = _add(n, _mul(n, f, c), _mul(n, i, cell.act(1, clipped(c_pre))))
    if cell.peep is not None:
        o_pre = _add(n, o_pre, _mul(n, cell.peep[1], c_new))
    o = cell.act(0, clipped(o_pre))
    return _mul(n, o, cell.act(2, c_new)), c_new


def convert_rnn(n: Node) -> tuple:
    x = n.value(0)
    layout = int(n.flag("layout", 0))
    if layout:
        x = n.emit(Op.PERMUTE, x, axes=[1, 0, 2])
    steps, batch, _ = x.type.shape
    if not all(isinstance(d, int) for d in x.type.shape):
        raise PolyloopError(f"{n.op_type} needs a constant sequence length and batch")
    hidden = int(n.attr("hidden_size"))
    direction = n.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise PolyloopError(f"direction {direction!r} is not forward, reverse or bidirectional")
    dirs = 2 if direction == "bidirectional" else 1
    clip = n.attr("clip")
    clip = None if clip is None else float(clip)
    acts = _activations(n, dirs)
    dtype = x.type.dtype
    lens = n.value(4) if n.has(4) else None
    flat = reshape(n, x, (steps * batch, x.type.shape[2]))
    ys, hs, cs = [], [], []
    for d in range(dirs):
        cell = _Cell(n, d, hidden, acts[d])
        proj = matmul(n, flat, cell.w_t)
        if cell.wb is not None:
            proj = _add(n, proj, cell.wb)
        h = _initial(n, 5, d, batch, hidden, dtype)
        c = _initial(n, 6, d, batch, hidden, dtype) if n.op_type == "LSTM" else None
        out = [None] * steps
        backward = direction == "reverse" or d == 1
        for t in (reversed(range(steps)) if backward else range(steps)):
            x_t = slice_axis(n, proj, 0, t * batch, batch)
            h_new, c_new = _step(cell, x_t, h, c, clip)
            if lens is not None:
                live = _live(n, lens, t, batch)
                h_new = n.emit(Op.WHERE, live, h_new, h)
                if c_new is not None:
                    c_new = n.emit(Op.WHERE, live, c_new, c)
                out[t] = n.emit(Op.WHERE, live, h_new, _scalar(n, h_new, 0.0))
            else:
                out[t] = h_new
            h, c = h_new, c_new
        ys.append(out)
        hs.append(h)
        cs.append(c)
    return _outputs(n, ys, hs, cs, steps, batch, hidden, dirs, layout)


def _initial(n: Node, k: int, d: int, batch: int, hidden: int, dtype: str) -> Value:
    if n.has(k):
        v = n.value(k)
        return reshape(n, slice_axis(n, v, 0, d, 1), (batch, hidden))
    return n.emit(Op.BROADCAST_TO, n.const(np.zeros((), dtype)), shape=(batch, hidden))


def _live(n: Node, lens: Value, t: int, batch: int) -> Value:
    length = reshape(n, n.emit(Op.CAST, lens, dtype="int64"), (batch, 1))
    return n.emit(Op.BINARY, n.const(np.array(t, "int64")), length, fn=BinaryFn.LT)


def _outputs(n: Node, ys, hs, cs, steps, batch, hidden, dirs, layout) -> tuple:
    y = y_h = y_c = None
    if n.wants(0):
        per_step = [n.emit(Op.CONCAT, *[reshape(n, ys[d][t], (1, 1, batch, hidden))
                                        for d in range(dirs)], axis=1) if dirs > 1 else
                    reshape(n, ys[0][t], (1, 1, batch, hidden)) for t in range(steps)]
        y = n.emit(Op.CONCAT, *per_step, axis=0) if steps > 1 else per_step[0]
        if layout:
            y = n.emit(Op.PERMUTE, y, axes=[2, 0, 1, 3])
    if n.wants(1):
        y_h = _stack(n, hs, batch, hidden, layout)
    if n.wants(2) and n.op_type == "LSTM":
        y_c = _stack(n, cs, batch, hidden, layout)
    return (y, y_h, y_c)


def _stack(n: Node, states: list, batch: int, hidden: int, layout: int) -> Value:
    parts = [reshape(n, s, (1, batch, hidden)) for s in states]
    out = n.emit(Op.CONCAT, *parts, axis=0) if len(parts) > 1 else n.emit(Op.COPY, parts[0])
    return n.emit(Op.PERMUTE, out, axes=[1, 0, 2]) if layout else out


CONVERTERS = {"RNN": convert_rnn, "GRU": convert_rnn, "LSTM": convert_rnn}
