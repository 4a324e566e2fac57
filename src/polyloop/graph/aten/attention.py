# SPDX-License-Identifier: Apache-2.0
"""``scaled_dot_product_attention`` with masks, causal masks and grouped-query heads.

Without a mask it is the graph's ``attention`` (its fused recipe). A constant mask that masks
nothing is dropped, and a constant lower-triangular one is the causal flag; any other mask
(additive float or bool) gives the decomposed form: ``softmax(q @ k^T * scale + mask) @ v``.
Grouped-query heads (fewer key/value heads than query heads) are repeated to the query's.
"""
from __future__ import annotations

import numpy as np

from ..ir import Op, Value
from ..oplib.nn import LOWEST
from .context import Call, Unsupported


def _repeat_heads(c: Call, t: Value, heads: object, tag: str) -> Value:
    """(..., h_kv, L, E) -> (..., heads, L, E), each key/value head serving heads / h_kv
    query heads in a row (PyTorch's ``enable_gqa`` and ``repeat_kv``)."""
    shape = t.type.shape
    h_kv = shape[-3]
    if h_kv == heads:
        return t
    if not (isinstance(h_kv, int) and isinstance(heads, int)) or heads % h_kv:
        raise Unsupported(f"{heads} query heads over {h_kv} key/value heads")
    lead, rest = shape[:-3], shape[-2:]
    g = heads // h_kv
    t = c.emit(Op.RESHAPE, t, shape=lead + (h_kv, 1) + rest, name=f"{c.name}_{tag}_split")
    t = c.emit(Op.BROADCAST_TO, t, shape=lead + (h_kv, g) + rest, name=f"{c.name}_{tag}_rep")
    return c.emit(Op.RESHAPE, t, shape=lead + (heads,) + rest, name=f"{c.name}_{tag}_heads")


def _constant_mask(c: Call, mask, length: object, kv_length: object):
    """(drop it, make it causal) for a constant mask that is trivial or lower-triangular."""
    m = c.importer.array(mask)
    if m.dtype == np.bool_:
        if m.all():
            return True, False
        if isinstance(length, int) and isinstance(kv_length, int) and length == kv_length:
            tril = np.tril(np.ones((length, kv_length), bool))
            if m.shape[-2:] == tril.shape and (m == tril).all():
                return False, True
    elif not m.any():
        return True, False
    return False, False


def attention(c: Call) -> Value:
    """``scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
    enable_gqa)``."""
    q, k, v = c.value(0), c.value(1), c.value(2)
    if c.arg(4, "dropout_p", 0.0):
        raise Unsupported("attention with dropout")
    if len(q.type.shape) != len(k.type.shape) or len(q.type.shape) < 3:
        raise Unsupported("attention on tensors of different ranks or without heads")
    heads = q.type.shape[-3]
    k, v = _repeat_heads(c, k, heads, "k"), _repeat_heads(c, v, heads, "v")
    causal, scale = bool(c.arg(5, "is_causal", False)), c.arg(6, "scale")
    mask = c.arg(3, "attn_mask")
    if c.importer.is_constant(mask):
        drop, as_causal = _constant_mask(c, mask, q.type.shape[-2], k.type.shape[-2])
        if drop or (as_causal and not causal):
            mask, causal = None, causal or as_causal
    if mask is None and q.type.shape[:-2] == k.type.shape[:-2]:
        return c.emit(Op.ATTENTION, q, k, v, causal=causal, scale=scale)
    return _decomposed(c, q, k, v, mask, causal, scale)


def _decomposed(c: Call, q: Value, k: Value, v: Value, mask, causal: bool, scale) -> Value:
    e = q.type.shape[-1]
    if scale is None:
        if not isinstance(e, int):
            raise Unsupported("attention with a symbolic head size")
        scale = 1.0 / float(e) ** 0.5
    rank = len(k.type.shape)
    kt = c.emit(Op.PERMUTE, k, axes=list(range(rank - 2)) + [rank - 1, rank - 2],
                name=f"{c.name}_kt")
    dtype = q.type.dtype
    s = c.emit(Op.MATMUL, q, kt, name=f"{c.name}_qk")
    s = c.emit(Op.MUL, s, c.constant(scale, dtype), name=f"{c.name}_scaled")
    if causal:
        length, kv = q.type.shape[-2], k.type.shape[-2]
        if not (isinstance(length, int) and isinstance(kv, int)):
            raise Unsupported("a causal mask beside another mask over symbolic lengths")
        s = c.emit(Op.WHERE, c.importer.constant_value(np.tril(np.ones((length, kv), bool)),
                                                       "causal"),
                   s, c.constant(LOWEST, dtype), name=f"{c.name}_causal")
    if mask is not None:
        m = c.importer.as_value(mask, dtype)
        if m.type.dtype == "bool":
            s = c.emit(Op.WHERE, m, s, c.constant(LOWEST, dtype), name=f"{c.name}_masked")
        else:
            s = c.emit(Op.ADD, s, m, name=f"{c.name}_masked")
    p = c.emit(Op.SOFTMAX, s, axis=rank - 1, name=f"{c.name}_p")
    return c.emit(Op.MATMUL, p, v)
