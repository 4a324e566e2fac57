# SPDX-License-Identifier: Apache-2.0
"""The general operators (``Op.UNARY`` ... ``Op.RESIZE``) against NumPy and PyTorch: one
hand-written graph with a symbolic batch and every operator as an output (built once),
awkward sizes, outputs poisoned before the run; then the refusals of the shape rules and the
NumPy folding of calls on constants."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.graph import Op
from polyloop.graph.kinds import (BinaryFn, CoordinateMode, NearestMode, PadMode, PoolFn,
                                  ReduceFn, ResizeMode, UnaryFn)

torch = pytest.importorskip("torch", reason="windows and resizes are checked against PyTorch")
F = torch.nn.functional
scipy_special = pytest.importorskip("scipy.special")

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


W = {"w_conv": rand(6, 2, 3, 2), "b_conv": rand(6), "w_t": rand(4, 3, 3), "scale": rand(4, 1, 1),
     "bias": rand(4, 1, 1), "gidx": np.array([[0, -1], [2, 1]], "int64"),
     "nd": np.array([[0, 1], [0, 4]], "int64"), "hot": np.array([0.5, 2.0], "float32")}


def _outputs(b, x, v, i, c):
    """Every case: name -> value; x: (n, 4, 7, 6), v: (n, 5), i: (n, 5) int64."""
    u = lambda fn, t, **a: b.emit(Op.UNARY, t, fn=fn, **a)      # noqa: E731
    bi = lambda fn, p, q: b.emit(Op.BINARY, p, q, fn=fn)        # noqa: E731
    win = dict(dilations=(1, 1))
    return {
        "asin": u(UnaryFn.ASIN, u(UnaryFn.TANH, v)), "sinh": u(UnaryFn.SINH, v),
        "softplus": u(UnaryFn.SOFTPLUS, v), "selu": u(UnaryFn.SELU, v),
        "hard_swish": u(UnaryFn.HARD_SWISH, v), "mish": u(UnaryFn.MISH, v),
        "gelu": u(UnaryFn.GELU, v), "isinf": u(UnaryFn.ISINF, bi(BinaryFn.DIV, v, v)),
        "sign_int": u(UnaryFn.SIGN, i), "clip_int": u(UnaryFn.CLIP, i, lo=-1, hi=2),
        "int_div": bi(BinaryFn.DIV, i, b.emit(Op.UNARY, i, fn=UnaryFn.CLIP, lo=-3, hi=3)),
        "int_fmod": bi(BinaryFn.FMOD, i, b.emit(Op.UNARY, i, fn=UnaryFn.CLIP, lo=-3, hi=3)),
        "int_mod": bi(BinaryFn.MOD, i, b.emit(Op.UNARY, i, fn=UnaryFn.CLIP, lo=-3, hi=3)),
        "pow": bi(BinaryFn.POW, u(UnaryFn.ABS, v), v), "lt": bi(BinaryFn.LT, v, i_f(b, i)),
        "where": b.emit(Op.WHERE, bi(BinaryFn.GT, v, b.constant(np.float32(0))), v, i_f(b, i)),
        "sum": b.emit(Op.REDUCE, x, fn=ReduceFn.SUM, axes=(1, 3)),
        "mean_keep": b.emit(Op.REDUCE, x, fn=ReduceFn.MEAN, axes=(2,), keepdims=True),
        "lse": b.emit(Op.REDUCE, v, fn=ReduceFn.LOG_SUM_EXP, axes=(1,)),
        "l2": b.emit(Op.REDUCE, x, fn=ReduceFn.L2, axes=(1, 2, 3)),
        "argmax": b.emit(Op.ARG_REDUCE, x, axis=2), "argmin_last": b.emit(
            Op.ARG_REDUCE, i, axis=1, largest=False, last=True, keepdims=True),
        "cumsum_rev_excl": b.emit(Op.CUMSUM, v, axis=1, reverse=True, exclusive=True),
        "slice": b.emit(Op.SLICE, x, begin=(0, 1, 6, 0), step=(1, 2, -3, 1),
                        size=("n", 2, 3, 6)),
        "pad_reflect": b.emit(Op.PAD, x, pads=(0, 0, 2, -1, 0, 1, 1, 3), mode=PadMode.REFLECT),
        "pad_const": b.emit(Op.PAD, v, pads=(0, 2, 0, -1), mode=PadMode.CONSTANT, value=1.5),
        "tile": b.emit(Op.TILE, v, repeats=(1, 3)),
        "gather": b.emit(Op.GATHER, x, c["gidx"], axis=3),
        "gather_nd": b.emit(Op.GATHER_ND, b.emit(Op.SELECT, x, axis=1, index=2), c["nd"]),
        "one_hot": b.emit(Op.ONE_HOT, i, c["hot"], depth=4, axis=1),
        "trilu": b.emit(Op.TRILU, x, upper=False, k=1),
        "einsum": b.emit(Op.EINSUM, x, x, equation="nchw,nkhw->nck"),
        "conv": b.emit(Op.CONV, x, c["w_conv"], c["b_conv"], strides=(2, 1), pads=(2, 1, 1, 0),
                       dilations=(1, 2), groups=2),
        "conv_t": b.emit(Op.CONV_TRANSPOSE, b.emit(Op.RESHAPE, x, shape=("n", 4, 42)),
                         c["w_t"], strides=(2,), pads=(1, 1), dilations=(2,),
                         output_padding=(1,)),
        "max_ceil": b.emit(Op.POOL, x, fn=PoolFn.MAX, kernel=(3, 3), strides=(2, 2),
                           pads=(1, 1, 1, 1), ceil_mode=True, **win),
        "avg_excl": b.emit(Op.POOL, x, fn=PoolFn.AVG, kernel=(3, 2), strides=(2, 2),
                           pads=(1, 1, 1, 1), **win),
        "argmax_pool": b.emit(Op.POOL, x, fn=PoolFn.ARGMAX, kernel=(2, 2), strides=(2, 2),
                              pads=(0, 0, 0, 0), **win),
        "group_norm": b.emit(Op.NORMALIZE, x, c["scale"], c["bias"], axes=(1, 2, 3)),
        "rms": b.emit(Op.NORMALIZE, v, axes=(1,), rms=True, eps=1e-6),
        "lrn": b.emit(Op.LRN, x, size=3, alpha=1e-3, beta=0.75, bias=1.0),
        "bilinear": b.emit(Op.RESIZE, x, mode=ResizeMode.LINEAR, shape=("n", 4, 14, 9),
                           coordinates=CoordinateMode.PYTORCH_HALF_PIXEL,
                           scales=(1.0, 1.0, 2.0, 1.5)),
        "nearest": b.emit(Op.RESIZE, x, mode=ResizeMode.NEAREST, shape=("n", 4, 14, 12),
                          coordinates=CoordinateMode.ASYMMETRIC, nearest=NearestMode.FLOOR,
                          scales=(1.0, 1.0, 2.0, 2.0)),
    }


def i_f(b, i):
    return b.emit(Op.CAST, i, dtype="float32")


def _expected(x, v, i):
    tx, sp = torch.from_numpy(x), scipy_special
    cl = np.clip(i, -3, 3)
    fi = i.astype("float32")
    with np.errstate(all="ignore"):
        trunc = np.where(cl == 0, 0, np.trunc(i / np.where(cl == 0, 1, cl))).astype("int64")
        fmod = np.where(cl == 0, 0, np.fmod(i, np.where(cl == 0, 1, cl)))
        mod = np.where(cl == 0, 0, np.mod(i, np.where(cl == 0, 1, cl)))
    wc, wt = torch.from_numpy(W["w_conv"]), torch.from_numpy(W["w_t"])
    idx = np.where(W["gidx"] < 0, W["gidx"] + 6, W["gidx"])
    _, pool_idx = F.max_pool2d(tx, 2, 2, return_indices=True)
    plane = (np.arange(x.shape[0])[:, None, None, None] * 4 + np.arange(4)[None, :, None, None])
    gn = F.group_norm(tx, 1).numpy() * W["scale"] + W["bias"]
    hot = np.where(np.arange(4)[None, :, None] == np.where(i < 0, i + 4, i)[:, None, :], 2.0, 0.5)
    return {
        "asin": np.arcsin(np.tanh(v)), "sinh": np.sinh(v), "softplus": np.log1p(np.exp(v)),
        "selu": F.selu(torch.from_numpy(v)).numpy(), "hard_swish": v * np.clip(v / 6 + .5, 0, 1),
        "mish": v * np.tanh(np.log1p(np.exp(v))), "gelu": 0.5 * v * (1 + sp.erf(v / 2 ** .5)),
        "isinf": np.zeros(v.shape, bool), "sign_int": np.sign(i), "clip_int": np.clip(i, -1, 2),
        "int_div": trunc, "int_fmod": fmod, "int_mod": mod, "pow": np.abs(v) ** v,
        "lt": v < fi, "where": np.where(v > 0, v, fi), "sum": x.sum((1, 3)),
        "mean_keep": x.mean(2, keepdims=True), "lse": np.log(np.exp(v).sum(1)),
        "l2": np.sqrt((x * x).sum((1, 2, 3))), "argmax": x.argmax(2),
        "argmin_last": i.shape[1] - 1 - i[:, ::-1].argmin(1)[:, None],
        "cumsum_rev_excl": np.cumsum(v[:, ::-1], 1)[:, ::-1] - v,
        "slice": x[:, 1:4:2, 6::-3, :],
        "pad_reflect": np.pad(x, ((0, 0), (0, 1), (2, 1), (0, 3)), mode="reflect")[:, :, :, 1:],
        "pad_const": np.pad(v, ((0, 0), (2, 0)), constant_values=1.5)[:, :-1],
        "tile": np.tile(v, (1, 3)), "gather": np.take(x, idx, axis=3),
        "gather_nd": x[:, 2][W["nd"][:, 0], W["nd"][:, 1]], "one_hot": hot.astype("float32"),
        "trilu": np.tril(x, 1), "einsum": np.einsum("nchw,nkhw->nck", x, x),
        "conv": F.conv2d(F.pad(tx, (1, 0, 2, 1)), wc, torch.from_numpy(W["b_conv"]),
                         stride=(2, 1), dilation=(1, 2), groups=2).numpy(),
        "conv_t": F.conv_transpose1d(tx.reshape(x.shape[0], 4, 42), wt, stride=2, padding=1,
                                     output_padding=1, dilation=2).numpy(),
        "max_ceil": F.max_pool2d(tx, 3, 2, 1, ceil_mode=True).numpy(),
        "avg_excl": F.avg_pool2d(tx, (3, 2), 2, 1, count_include_pad=False).numpy(),
        "argmax_pool": pool_idx.numpy() + plane * 42, "group_norm": gn,
        "rms": v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6),
        "lrn": F.local_response_norm(tx, 3, alpha=1e-3).numpy(),
        "bilinear": F.interpolate(tx, size=(14, 9), mode="bilinear").numpy(),
        "nearest": F.interpolate(tx, size=(14, 12), mode="nearest").numpy(),
    }


@pytest.fixture(scope="module")
def general():
    b = pl.graph.GraphBuilder("general")
    x = b.input("x", ("n", 4, 7, 6))
    v = b.input("v", ("n", 5))
    i = b.input("i", ("n", 5), "int64")
    c = {k: b.constant(val, k) for k, val in W.items()}
    outs = _outputs(b, x, v, i, c)
    return list(outs), pl.graph.build(b.build(*outs.values()))


def _poisoned(ex, n):
    outs = []
    for v in ex.graph.outputs:
        shape = v.type.concrete({"n": n})
        fill = {"bool": True, "int64": -777}.get(v.type.dtype, np.nan)
        outs.append(np.full(shape, fill, v.type.dtype))
    return tuple(outs)


@pytest.mark.parametrize("n", [2, 3])
def test_general_operators_match_numpy_and_torch(general, n):
    names, ex = general
    x, v = rand(n, 4, 7, 6), rand(n, 5)
    i = RNG.integers(-6, 6, (n, 5)).astype("int64")
    out = _poisoned(ex, n)
    ex(x, v, i, out=out)
    expected = _expected(x, v, i)
    for name, got in zip(names, out):
        want = np.asarray(expected[name])
        assert got.shape == want.shape, name
        if got.dtype.kind in "bi":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("op, shape, attrs, message", [
    (Op.UNARY, (3,), {"fn": UnaryFn.SIN, "dtype": "int64"}, "not defined on int64"),
    (Op.REDUCE, (3, 4), {"fn": ReduceFn.SUM, "axes": (1, -1)}, "repeat an axis"),
    (Op.REDUCE, (3, 4), {"fn": ReduceFn.SUM, "axes": (2,)}, "out of range"),
    (Op.SLICE, (5,), {"begin": (3,), "step": (1,), "size": (3,)}, "leave [0, 5)"),
    (Op.PAD, (3,), {"pads": (3, 0), "mode": PadMode.REFLECT}, "cannot take pads"),
    (Op.BROADCAST_TO, (3, 2), {"shape": (3, 4)}, "cannot be broadcast"),
    (Op.CONV, (1, 3, 4, 4), {"w": (2, 2, 3, 3), "strides": (1, 1), "pads": (0,) * 4,
                             "dilations": (1, 1)}, "groups"),
    (Op.POOL, (1, 1, 2), {"fn": PoolFn.MAX, "kernel": (5,), "strides": (1,), "pads": (0, 0),
                          "dilations": (1,)}, "does not fit"),
    (Op.EINSUM, (2, 3), {"equation": "ij->k"}, "no operand has"),
])
def test_shape_rules_refuse_with_the_operator_named(op, shape, attrs, message):
    b = pl.graph.GraphBuilder("bad")
    x = b.input("x", shape, attrs.pop("dtype", "float32"))
    extra = [b.constant(np.ones(attrs.pop("w"), "float32"))] if "w" in attrs else []
    with pytest.raises(pl.PolyloopError, match=str(op)) as err:
        b.emit(op, x, *extra, **attrs)
    assert message in str(err.value)


def test_folding_computes_calls_on_constants_with_numpy():
    b = pl.graph.GraphBuilder("fold", fold=True)
    shape = b.constant(np.array([2, 3, 4], "int64"))
    picked = b.emit(Op.GATHER, shape, b.constant(np.array([-1, 0], "int64")))
    doubled = b.emit(Op.BINARY, picked, b.constant(np.array(2, "int64")), fn=BinaryFn.MUL)
    np.testing.assert_array_equal(b.data(doubled), [8, 4])
    x = b.input("x", (2,))
    y = b.emit(Op.UNARY, x, fn=UnaryFn.ABS)      # an input: stays a call
    assert b.data(y) is None
