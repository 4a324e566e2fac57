# SPDX-License-Identifier: Apache-2.0
"""bfloat16 products in a float32 model (``pl.graph.build(g, dtype="bfloat16")``).

``use_bfloat16`` (a graph pass, after constant folding, before fusion) replaces each
convolution and matrix product that ``polyloop.ops``' bf16 operators take by a tensor-
expression call of one of the descriptions below: the weights are rounded to bfloat16 (to
nearest even) once, here, and stored as the operator reads them (a dense layer's in the column
panels of ``ops.pack_bf16_weight``); the activations are rounded as the operator groups them
(its ``X_g`` / ``A_g`` / ``B_g`` stage); the sums are float32, and so is everything else: the
bias is added to the float32 sum, and the elementwise chain after a product (residual add,
ReLU, GELU) joins its kernel as in a float32 build (``takes_epilogue``), applied as each tile
is written back. What the operators do not take stays float32; ``Executor.report()`` marks
the kernels that run in bfloat16 and lists the products that do not.

Taken: ``conv2d`` with one group, no dilation, the same stride and padding on both axes and
constant weights (with stride 1 and rows of output pixels that fill most of a tile, along the
rows: ``Bf16ConvRows``; else pixel-major: ``Bf16Conv``; a strided 1 x 1 convolution reads a
slice of its input's pixels with stride 1); ``linear`` and ``matmul`` with a constant 2-D right operand; ``matmul`` of
two activations of equal leading axes (the batched products of attention).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import ops
from ..errors import PolyloopError, ScheduleError
from ..frontend.te import Tensor
from ..ir.dtypes import bfloat16_numpy
from .ir import INJECTIVE, Call, Constant, Graph, KernelCall, Op, TensorType, Value
from .oplib.custom import call_te

# the values of build's ``dtype``
DTYPES = ("float32", "bfloat16")
# the products a bf16 build may take: the ops whose float32 kernels it replaces
PRODUCTS = frozenset({Op.CONV2D, Op.LINEAR, Op.MATMUL, Op.CONV, Op.ATTENTION, Op.EINSUM})


def check_dtype(dtype: object) -> str:
    """``dtype`` when ``pl.graph.build`` takes it, else a ``PolyloopError`` naming the values.

    >>> check_dtype("bfloat16")
    'bfloat16'
    """
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise PolyloopError(f"pl.graph.build(dtype={dtype!r}): the precision of the matrix "
                            f"products must be one of {', '.join(map(repr, DTYPES))}")
    return dtype


@dataclass(frozen=True, slots=True)
class Bf16Conv:
    """``ops.conv2d_bf16`` of a float32 input and bfloat16 weights (+ a float32 bias);
    ``out_channels`` set: ``conv2d_bf16_packed`` on weights packed by
    ``ops.pack_bf16_conv_weight``.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 3, 6, 6), "float32", name="X")
    >>> Bf16Conv(2, 1)(X, pl.placeholder((5, 3, 3, 3), "bfloat16", name="W"))
    Tensor(Y: float32[1, 5, 3, 3])
    """

    stride: int
    padding: int
    out_channels: int | None = None
    takes_epilogue: ClassVar[bool] = True

    def __call__(self, x: Tensor, w: Tensor, *bias: Tensor) -> Tensor:
        b = bias[0] if bias else None
        if self.out_channels is not None:
            return ops.conv2d_bf16_packed(x, w, self.out_channels, stride=self.stride,
                                          padding=self.padding, bias=b)
        return ops.conv2d_bf16(x, w, stride=self.stride, padding=self.padding, bias=b)

    def library_schedule(self, y: Tensor):
        """The bf16 recipe's schedule; None (the default schedule) where it cannot tile this
        convolution."""
        try:
            return ops.schedule_conv2d_bf16(y)
        except ScheduleError:
            return None


@dataclass(frozen=True, slots=True)
class Bf16ConvRows:
    """``ops.conv2d_bf16_rows`` (stride 1) of a float32 input and bfloat16 weights packed by
    ``ops.pack_bf16_conv_rows_weight`` (+ a float32 bias): tiles along the rows of output
    pixels, NCHW in and out.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 3, 6, 6), "float32", name="X")
    >>> Bf16ConvRows(1)(X, pl.placeholder((5, 3, 3, 2, 2), "bfloat16", name="W"))
    Tensor(Y: float32[1, 5, 6, 6])
    """

    padding: int
    takes_epilogue: ClassVar[bool] = True

    def __call__(self, x: Tensor, w: Tensor, *bias: Tensor) -> Tensor:
        return ops.conv2d_bf16_rows(x, w, padding=self.padding, bias=bias[0] if bias else None)

    def library_schedule(self, y: Tensor):
        try:
            return ops.schedule_conv2d_bf16_rows(y)
        except ScheduleError:
            return None


@dataclass(frozen=True, slots=True)
class Bf16Matmul:
    """``ops.matmul_bf16`` of float32 operands (``columns`` set: ``matmul_bf16_packed`` on
    weights packed by ``ops.pack_bf16_weight``), + a float32 bias.

    >>> import polyloop as pl
    >>> A = pl.placeholder((3, 5), "float32", name="A"); B = pl.placeholder((5, 7), name="B")
    >>> Bf16Matmul()(A, B)
    Tensor(Y: float32[3, 7])
    """

    columns: int | None = None
    takes_epilogue: ClassVar[bool] = True

    def __call__(self, a: Tensor, b: Tensor, *bias: Tensor) -> Tensor:
        if self.columns is not None:
            return ops.matmul_bf16_packed(a, b, self.columns, bias=bias[0] if bias else None)
        return ops.matmul_bf16(a, b, bias=bias[0] if bias else None)

    def library_schedule(self, y: Tensor):
        try:
            return ops.schedule_matmul_bf16(y)
        except ScheduleError:
            return None


def is_bf16(call: Call) -> bool:
    """Whether a graph call is one of this module's bfloat16 products."""
    return call.op is Op.TE and isinstance(call.attr("fn"), (Bf16Conv, Bf16ConvRows, Bf16Matmul))


class _Rewriter:
    """The state of one ``use_bfloat16`` run: the constants, the new ones, the bindings."""

    def __init__(self, g: Graph) -> None:
        self.data = g.constant_data()
        self.new: list[Constant] = []
        self.made: dict[tuple[str, str], Value] = {}
        self.names = {v.name for v in g.inputs} | set(self.data) | {
            v.name for b in g.bindings for v in b.outputs}
        self.bindings: list = []

    def fresh(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.names:
            k += 1
            name = f"{hint}{k}"
        self.names.add(name)
        return name

    def constant(self, key: tuple[str, str], data: np.ndarray) -> Value:
        """A new constant, made once per ``key`` (weights shared by layers are one)."""
        if key not in self.made:
            value = Value(self.fresh(f"{key[0]}_{key[1]}"),
                          TensorType(data.shape, str(data.dtype)))
            self.new.append(Constant(value, np.ascontiguousarray(data)))
            self.made[key] = value
        return self.made[key]

    def emit(self, fn, inputs: tuple[Value, ...], out: Value) -> None:
        result = call_te(fn, inputs)
        digest = hashlib.sha256(str(result.to_program()).encode()).hexdigest()[:16]
        self.bindings.append(Call((out,), Op.TE, inputs, (("fn", fn), ("program", digest))))


def _square(pair: object) -> int | None:
    return pair[0] if isinstance(pair, tuple) and len(pair) == 2 and pair[0] == pair[1] \
        else None


# a tile's width in pixels, and the share of its lanes a row of output pixels must fill for
# the convolution to run along the rows (NCHW in and out) rather than pixel-major (which
# transposes its input and output: costly where the channels are few and the images large)
ROW_TILE = 32
ROW_FILL = 0.6


def _wide_rows(out: Value) -> bool:
    """Whether the rows of an NCHW output fill the row tiles well enough (see ``ROW_FILL``)."""
    width = out.type.shape[3]
    return isinstance(width, int) and width / (ROW_TILE * -(-width // ROW_TILE)) >= ROW_FILL


def _subsampled(r: _Rewriter, x: Value, stride: int, out: Value) -> Value:
    """The pixels a 1 x 1 convolution of ``stride`` reads (every ``stride``-th of each row and
    column), sliced out first: the convolution then has stride 1, and converts and groups
    only these (it read the whole input for a quarter of it at stride 2)."""
    n, c_in = x.type.shape[:2]
    size = (n, c_in, *out.type.shape[2:])
    sliced = Value(r.fresh(f"{x.name}_stride{stride}"), TensorType(size, x.type.dtype))
    r.bindings.append(Call((sliced,), Op.SLICE, (x,), (
        ("begin", (0, 0, 0, 0)), ("step", (1, 1, stride, stride)), ("size", size))))
    return sliced


def _conv(r: _Rewriter, c: Call) -> bool:
    x, w = c.inputs[0], c.inputs[1]
    stride, padding = _square(c.attr("stride")), _square(c.attr("padding"))
    if c.attr("groups") != 1 or c.attr("dilation") != (1, 1) or stride is None \
            or padding is None or w.name not in r.data or x.type.dtype != "float32" \
            or any(v.name not in r.data for v in c.inputs[2:]):
        return False
    data = r.data[w.name]
    if stride > 1 and data.shape[2:] == (1, 1) and padding == 0:
        x, stride = _subsampled(r, x, stride, c.outputs[0]), 1
    if stride == 1 and isinstance(x.type.shape[1], int) and _wide_rows(c.outputs[0]):
        weight = r.constant((w.name, "bf16_rows"), ops.pack_bf16_conv_rows_weight(data))
        r.emit(Bf16ConvRows(padding), (x, weight, *c.inputs[2:]), c.outputs[0])
        return True
    if isinstance(x.type.shape[1], int):       # packed once, as the recipe reads them
        weight = r.constant((w.name, "bf16_panels"), ops.pack_bf16_conv_weight(data))
        fn = Bf16Conv(stride, padding, data.shape[0])
    else:
        weight = r.constant((w.name, "bf16"), data.astype(bfloat16_numpy()))
        fn = Bf16Conv(stride, padding)
    r.emit(fn, (x, weight, *c.inputs[2:]), c.outputs[0])
    return True


def _dense(r: _Rewriter, c: Call) -> bool:
    """A linear layer, or a product by a constant matrix: on packed bf16 panels."""
    x, w = c.inputs[0], c.inputs[1]
    if w.name not in r.data or len(w.type.shape) != 2 or x.type.dtype != "float32" \
            or len(x.type.shape) < 2 or c.attr("columns") is not None \
            or any(v.name not in r.data for v in c.inputs[2:]):
        return False
    matrix = r.data[w.name]
    if c.op is Op.LINEAR and not c.attr("transposed"):
        matrix = matrix.T                    # (out, in) -> (in, out)
    packed = r.constant((w.name, "bf16_panels"), ops.pack_bf16_weight(
        np.ascontiguousarray(matrix, dtype=np.float32)))
    r.emit(Bf16Matmul(matrix.shape[1]), (x, packed, *c.inputs[2:]), c.outputs[0])
    return True


def _batched(r: _Rewriter, c: Call) -> bool:
    """A product of two activations with the same leading axes (attention's)."""
    if len(c.inputs) != 2:
        return False
    a, b = c.inputs
    sa, sb = a.type.shape, b.type.shape
    if len(sa) != len(sb) or len(sa) < 2 or sa[:-2] != sb[:-2] \
            or a.type.dtype != "float32" or b.type.dtype != "float32":
        return False
    r.emit(Bf16Matmul(), (a, b), c.outputs[0])
    return True


def use_bfloat16(g: Graph) -> Graph:
    """Run the graph's convolutions and matrix products that the bf16 operators take in
    bfloat16 (see the module docstring); every other call is unchanged.

    >>> import numpy as np, polyloop as pl
    >>> b = pl.graph.GraphBuilder("f"); x = b.input("x", ("n", 6))
    >>> w = b.constant(np.ones((6, 4), "float32"), "w")
    >>> g = use_bfloat16(b.build(b.emit(pl.graph.Op.MATMUL, x, w)))
    >>> [str(c.value.type) for c in g.constants]
    ['float32[6, 4]', 'bfloat16[1, 3, 32, 2]']
    """
    r = _Rewriter(g)
    for b in g.bindings:
        taken = isinstance(b, Call) and (
            (b.op is Op.CONV2D and _conv(r, b))
            or (b.op in (Op.LINEAR, Op.MATMUL) and _dense(r, b))
            or (b.op is Op.MATMUL and _batched(r, b)))
        if not taken:
            r.bindings.append(b)
    g = g.replace(bindings=tuple(r.bindings), constants=g.constants + tuple(r.new))
    return _stored_rounded(g, r)


def _rounded_inputs(call: Call) -> tuple[int, ...]:
    """The inputs of a bf16 product that it rounds to bfloat16 (its activations)."""
    fn = call.attr("fn")
    return (0, 1) if isinstance(fn, Bf16Matmul) and fn.columns is None else (0,)


def _stored_rounded(g: Graph, r: _Rewriter) -> Graph:
    """Store in bfloat16 each float32 value that only bf16 products read, where it ends an
    elementwise chain after another bf16 product (the chain joins that product's kernel,
    the conversion with it): every reader rounded it to bfloat16 (to nearest even) as it
    read it, so rounding it once as it is written gives the same results, with half the
    bytes written and read."""
    readers: dict[str, list[tuple[Call, int]]] = {}
    for b in g.bindings:
        for k, v in enumerate(b.inputs):
            readers.setdefault(v.name, []).append((b, k))
    outputs = {v.name for v in g.outputs}
    cast: dict[str, Value] = {}
    for b in g.bindings:
        if not (isinstance(b, Call) and is_bf16(b)):
            continue
        v = b.outputs[0]
        while len(readers.get(v.name, ())) == 1 and v.name not in outputs:
            (nxt, _), = readers[v.name]
            if not (isinstance(nxt, Call) and nxt.op in INJECTIVE and nxt.op is not Op.CAST
                    and len(nxt.outputs) == 1 and nxt.outputs[0].type == v.type):
                break
            v = nxt.outputs[0]
        found = readers.get(v.name, ())
        if v.type.dtype == "float32" and v.name not in outputs and found and all(
                isinstance(c, Call) and is_bf16(c) and k in _rounded_inputs(c)
                for c, k in found):
            cast[v.name] = Value(r.fresh(f"{v.name}_bf16"), TensorType(v.type.shape,
                                                                         "bfloat16"))
    if not cast:
        return g
    bindings = []
    for b in g.bindings:
        if isinstance(b, Call) and any(v.name in cast for v in b.inputs):
            b = Call(b.outputs, b.op, tuple(cast.get(v.name, v) for v in b.inputs), b.attrs)
        bindings.append(b)
        for v in b.outputs:
            if v.name in cast:
                bindings.append(Call((cast[v.name],), Op.CAST, (v,),
                                     (("dtype", "bfloat16"),)))
    return g.replace(bindings=tuple(bindings))


def bf16_kernels(g: Graph) -> set[str]:
    """The names of an optimized graph's kernels that compute a bfloat16 product."""
    return {b.kernel.name for b in g.bindings
            if isinstance(b, KernelCall) and any(is_bf16(c) for c in b.kernel.body)}


def precision_lines(g: Graph) -> list[str]:
    """For ``Executor.report``: the products of an optimized graph that stayed float32 when
    some ran in bfloat16 (none when none did)."""
    kernels = {b.kernel.name: b.kernel for b in g.bindings if isinstance(b, KernelCall)}
    bf16 = bf16_kernels(g)
    if not bf16:
        return []
    kept = [f"{c.op} %{c.outputs[0].name}" for k in kernels.values() for c in k.body
            if c.op in PRODUCTS]
    lines = [f"{len(bf16)} kernel(s) with bfloat16 products, {len(kept)} product(s) in "
             "float32" + (":" if kept else "")]
    return lines + [f"  float32   {k}" for k in kept]
