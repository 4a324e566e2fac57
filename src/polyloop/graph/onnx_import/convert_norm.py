# SPDX-License-Identifier: Apache-2.0
"""ONNX normalisations, softmax and its kin, reductions and arg-reductions."""
from __future__ import annotations

import numpy as np

from ...errors import PolyloopError
from ..ir import Op, Value
from ..kinds import BinaryFn, ReduceFn, UnaryFn
from .convert_tensor import reshape
from .dims import flat, normalize
from .node import Node


def convert_batch_norm(n: Node) -> Value | tuple:
    momentum = float(n.attr("momentum", 0.9))
    if n.opset < 9 and not n.flag("spatial", 1):
        raise PolyloopError("BatchNormalization with spatial=0 is not supported")
    if n.opset < 7:
        n.attr("is_test")
    x = n.value(0)
    if len(x.type.shape) < 2:
        raise PolyloopError("BatchNormalization needs (N, C, ...) data")
    eps = float(n.attr("epsilon", 1e-5))
    training = n.flag("training_mode", 0)
    if not training and any(n.wants(k) for k in range(1, 5)):
        raise PolyloopError("BatchNormalization's running statistics are outputs only in "
                            "training mode (training_mode=1)")
    if not training:
        return n.emit(Op.BATCH_NORM, *[n.value(k) for k in range(5)], eps=eps)
    if n.opset < 14:
        raise PolyloopError("BatchNormalization in training mode before opset 14 is not "
                            "supported")
    axes = (0,) + tuple(range(2, len(x.type.shape)))
    mean = n.emit(Op.REDUCE, x, fn=ReduceFn.MEAN, axes=axes)
    centred = n.emit(Op.BINARY, x, reshape(n, mean, (x.type.shape[1],) + (1,) * (
        len(x.type.shape) - 2)), fn=BinaryFn.SUB)
    var = n.emit(Op.REDUCE, n.emit(Op.BINARY, centred, centred, fn=BinaryFn.MUL),
                 fn=ReduceFn.MEAN, axes=axes)
    y = n.emit(Op.BATCH_NORM, x, n.value(1), n.value(2), mean, var, eps=eps)

    def running(k: int, batch: Value) -> Value:
        keep = n.emit(Op.BINARY, n.value(k), n.const(np.array(momentum, x.type.dtype)),
                      fn=BinaryFn.MUL)
        new = n.emit(Op.BINARY, batch, n.const(np.array(1 - momentum, x.type.dtype)),
                     fn=BinaryFn.MUL)
        return n.emit(Op.BINARY, keep, new, fn=BinaryFn.ADD)
    return (y, running(3, mean) if n.wants(1) else None, running(4, var) if n.wants(2) else None)


def _per_channel(n: Node, v: Value, rank: int) -> Value:
    """A (C,) parameter shaped (C, 1, ...) to broadcast over (N, C, spatial...)."""
    return reshape(n, v, v.type.shape + (1,) * (rank - 2))


def convert_instance_norm(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    if rank < 3:
        raise PolyloopError("InstanceNormalization needs (N, C, spatial...) data")
    return n.emit(Op.NORMALIZE, x, _per_channel(n, n.value(1), rank),
                  _per_channel(n, n.value(2), rank), axes=tuple(range(2, rank)),
                  eps=float(n.attr("epsilon", 1e-5)))


def _stash(n: Node) -> None:
    stash = int(n.attr("stash_type", 1))
    if stash != 1:
        raise PolyloopError(f"stash_type={stash}: only float32 statistics (1) are supported")


def convert_layer_norm(n: Node) -> tuple:
    x = n.value(0)
    rank = len(x.type.shape)
    axis = normalize(int(n.attr("axis", -1)), rank)
    eps = float(n.attr("epsilon", 1e-5))
    _stash(n)
    axes = tuple(range(axis, rank))
    scale = n.value(1)
    bias = n.value(2) if n.has(2) else None
    trailing = x.type.shape[axis:]
    if scale.type.shape == trailing and bias is not None and bias.type.shape == trailing \
            and x.type.dtype == "float32":
        y = n.emit(Op.LAYER_NORM, x, scale, bias, ndims=rank - axis, eps=eps)
    else:
        y = n.emit(Op.NORMALIZE, x, scale, *([bias] if bias is not None else []), axes=axes,
                   eps=eps)
    mean = inv = None
    if n.wants(1) or n.wants(2):
        mean = n.emit(Op.REDUCE, x, fn=ReduceFn.MEAN, axes=axes, keepdims=True)
        centred = n.emit(Op.BINARY, x, mean, fn=BinaryFn.SUB)
        square = n.emit(Op.BINARY, centred, centred, fn=BinaryFn.MUL)
        var = n.emit(Op.REDUCE, square, fn=ReduceFn.MEAN, axes=axes, keepdims=True)
        shifted = n.emit(Op.BINARY, var, n.const(np.array(eps, x.type.dtype)), fn=BinaryFn.ADD)
        inv = n.emit(Op.UNARY, n.emit(Op.UNARY, shifted, fn=UnaryFn.SQRT),
                     fn=UnaryFn.RECIPROCAL)
    return (y, mean, inv)


def convert_group_norm(n: Node) -> Value:
    x = n.value(0)
    shape = x.type.shape
    rank = len(shape)
    groups = int(n.attr("num_groups"))
    eps = float(n.attr("epsilon", 1e-5))
    _stash(n)
    c = shape[1]
    if rank < 3 or not isinstance(c, int) or groups < 1 or c % groups:
        raise PolyloopError(f"GroupNormalization needs (N, C, ...) data with C divisible by "
                            f"num_groups ({groups})")
    rest = flat(n.sizes, (c // groups,) + shape[2:], "a group's size")
    grouped = reshape(n, x, (shape[0], groups, rest))
    y = reshape(n, n.emit(Op.NORMALIZE, grouped, axes=(2,), eps=eps), shape)
    scale, bias = n.value(1), n.value(2)
    if n.opset < 21 and scale.type.shape == (groups,) and groups != c:
        rep = n.const(np.repeat(np.arange(groups), c // groups).astype("int64"))
        scale = n.emit(Op.GATHER, scale, rep, axis=0)
        bias = n.emit(Op.GATHER, bias, rep, axis=0)
    y = n.emit(Op.BINARY, y, _per_channel(n, scale, rank), fn=BinaryFn.MUL)
    return n.emit(Op.BINARY, y, _per_channel(n, bias, rank), fn=BinaryFn.ADD)


def convert_rms_norm(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    axis = normalize(int(n.attr("axis", -1)), rank)
    _stash(n)
    return n.emit(Op.NORMALIZE, x, n.value(1), axes=tuple(range(axis, rank)),
                  eps=float(n.attr("epsilon", 1e-5)), rms=True)


def convert_mvn(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    axes = [normalize(int(a), rank) for a in n.attr("axes", [0, 2, 3])]
    return n.emit(Op.NORMALIZE, x, axes=tuple(sorted(axes)), eps=1e-9)


def convert_lp_norm(n: Node) -> Value:
    x = n.value(0)
    axis = normalize(int(n.attr("axis", -1)), len(x.type.shape))
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise PolyloopError(f"LpNormalization with p={p}: only 1 and 2 are defined")
    norm = n.emit(Op.REDUCE, x, fn=ReduceFn.L1 if p == 1 else ReduceFn.L2, axes=(axis,),
                  keepdims=True)
    zero = n.const(np.array(0, x.type.dtype))
    ratio = n.emit(Op.BINARY, x, norm, fn=BinaryFn.DIV)
    return n.emit(Op.WHERE, n.emit(Op.BINARY, norm, zero, fn=BinaryFn.EQ), zero, ratio)


def convert_softmax(n: Node) -> Value:
    """Softmax, LogSoftmax and Hardmax: along ``axis`` (opset 13 on); before, over the input
    flattened to 2-D at ``axis``."""
    x = n.value(0)
    shape = x.type.shape
    rank = len(shape)
    legacy = n.opset < 13
    axis = int(n.attr("axis", 1 if legacy else -1))
    if not -rank <= axis < max(rank, 1):
        raise PolyloopError(f"axis {axis} is out of range for rank {rank}")
    axis %= max(rank, 1)
    src = x
    if legacy and rank != 2:
        lead = flat(n.sizes, shape[:axis], "the leading axes")
        src = reshape(n, x, (lead, flat(n.sizes, shape[axis:], "the trailing axes")))
        axis = 1
    if n.op_type == "Hardmax":
        d = src.type.shape[axis]
        if not isinstance(d, int):
            raise PolyloopError("Hardmax along a symbolic axis is not supported")
        best = n.emit(Op.ARG_REDUCE, src, axis=axis)
        y = n.emit(Op.ONE_HOT, best, n.const(np.array([0, 1], x.type.dtype)), depth=d,
                   axis=axis)
    else:
        y = n.emit(Op.SOFTMAX if n.op_type == "Softmax" else Op.LOG_SOFTMAX, src, axis=axis)
    return reshape(n, y, shape)


_REDUCE = {"ReduceSum": ReduceFn.SUM, "ReduceMean": ReduceFn.MEAN, "ReduceMax": ReduceFn.MAX,
           "ReduceMin": ReduceFn.MIN, "ReduceProd": ReduceFn.PROD, "ReduceL1": ReduceFn.L1,
           "ReduceL2": ReduceFn.L2, "ReduceLogSum": ReduceFn.LOG_SUM,
           "ReduceLogSumExp": ReduceFn.LOG_SUM_EXP, "ReduceSumSquare": ReduceFn.SUM_SQUARE}


def convert_reduce(n: Node) -> Value:
    x = n.value(0)
    rank = len(x.type.shape)
    keep = n.flag("keepdims", 1)
    as_input = n.opset >= (13 if n.op_type == "ReduceSum" else 18)
    if as_input:
        axes = n.ints(1, "the axes") if n.has(1) else []
        noop = n.flag("noop_with_empty_axes", 0)
    else:
        axes, noop = [int(a) for a in n.attr("axes", [])], False
    if not axes:
        if noop:
            return n.emit(Op.COPY, x)
        axes = list(range(rank))
    axes = sorted(normalize(a, rank) for a in axes)
    if len(set(axes)) != len(axes):
        raise PolyloopError(f"axes {axes} repeat an axis")
    return n.emit(Op.REDUCE, x, fn=_REDUCE[n.op_type], axes=tuple(axes), keepdims=keep)


def convert_arg(n: Node) -> Value:
    x = n.value(0)
    axis = normalize(int(n.attr("axis", 0)), len(x.type.shape))
    return n.emit(Op.ARG_REDUCE, x, axis=axis, keepdims=n.flag("keepdims", 1),
                  largest=n.op_type == "ArgMax", last=n.flag("select_last_index", 0))


def convert_topk(n: Node) -> tuple:
    x = n.value(0)
    axis = normalize(int(n.attr("axis", -1)), len(x.type.shape))
    if n.opset < 10:
        k = int(n.attr("k"))
    else:
        k = int(n.array(1, "k").reshape(-1)[0])
    n.flag("sorted", 1)      # the outputs are always sorted, which sorted=0 also allows
    largest = n.flag("largest", 1)
    values = n.emit(Op.TOPK, x, k=k, axis=axis, largest=largest) if n.wants(0) else None
    indices = n.emit(Op.TOPK, x, k=k, axis=axis, largest=largest, indices=True) \
        if n.wants(1) else None
    return (values, indices)


CONVERTERS = {
    "TopK": convert_topk,
    "BatchNormalization": convert_batch_norm, "InstanceNormalization": convert_instance_norm,
    "LayerNormalization": convert_layer_norm, "GroupNormalization": convert_group_norm,
    "RMSNormalization": convert_rms_norm, "MeanVarianceNormalization": convert_mvn,
    "LpNormalization": convert_lp_norm, "Softmax": convert_softmax,
    "LogSoftmax": convert_softmax, "Hardmax": convert_softmax,
    **{k: convert_arg for k in ("ArgMax", "ArgMin")},
    **{k: convert_reduce for k in _REDUCE},
}
