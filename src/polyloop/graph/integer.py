# SPDX-License-Identifier: Apache-2.0
"""Integer kernels of quantized models: ``polyloop.ops``' int8 products as ``Op.TE`` calls.

An importer emits a quantized convolution or matrix product (ONNX ``QLinearConv``,
``QLinearMatMul``, ``ConvInteger``, ``MatMulInteger``, and the Q/DQ patterns folded into
them) or a quantized addition (``QLinearAdd``) as a tensor-expression call whose function is one of these frozen descriptions. The
description builds the ``polyloop.ops`` tensor (``u8/s8 x s8`` products summed in int32, the
zero points as correction terms, then a bias, a scale and a requantization that rounds halves
to even and saturates) and names the operator schedule that runs it on the CPU's dot-product
tiles (``library_schedule``). Operands given as tensors follow ``a`` and ``b`` in the call's
inputs, in the order of the fields that say so.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ops
from ..errors import ScheduleError
from ..frontend import te
from ..frontend.te import Tensor
from ..ir.dtypes import DType
from ..ir.elementwise import where
from ..ir.expr import Cast, cast, const
from ..ir.quantize import dequantize_linear, quantize_linear
from ..schedule import Schedule


@dataclass(frozen=True, slots=True)
class Epilogue:
    """What follows the int32 sum. ``scale``/``a_zero``/``b_zero``: a number, or None when it
    is an input tensor (in the order b_zero, a_zero, bias, scale after the two operands)."""

    out_dtype: str = "int32"
    a_zero: int | None = 0
    b_zero: int | None = 0
    bias: bool = False
    scale: float | None = None
    tensor_scale: bool = False
    out_zero: int = 0

    def arguments(self, rest: list[Tensor]) -> dict:
        it = iter(rest)
        args: dict = {"b_zero": self.b_zero if self.b_zero is not None else next(it),
                      "a_zero": self.a_zero if self.a_zero is not None else next(it)}
        args["bias"] = next(it) if self.bias else None
        args["scale"] = next(it) if self.tensor_scale else self.scale
        return args


@dataclass(frozen=True, slots=True)
class IntegerMatmul:
    """``ops.matmul_int8`` (``columns`` set: ``matmul_int8_packed`` on weights packed by
    ``ops.pack_int8_weight``, ``b_dtype`` the dtype they had).

    >>> import polyloop as pl
    >>> A = pl.placeholder((3, 5), "uint8", name="A"); B = pl.placeholder((5, 7), "int8", name="B")
    >>> IntegerMatmul(Epilogue(a_zero=4))(A, B)
    Tensor(Y: int32[3, 7])
    """

    epilogue: Epilogue
    columns: int | None = None
    b_dtype: str = "int8"

    def __call__(self, a: Tensor, b: Tensor, *rest: Tensor) -> Tensor:
        e = self.epilogue
        args = e.arguments(list(rest))
        common = dict(a_zero_point=args["a_zero"], b_zero_point=args["b_zero"],
                      bias=args["bias"], scale=args["scale"], out_zero_point=e.out_zero,
                      out_dtype=e.out_dtype)
        if self.columns is not None:
            return ops.matmul_int8_packed(a, b, self.columns, b_dtype=self.b_dtype, **common)
        return ops.matmul_int8(a, b, **common)

    def library_schedule(self, y: Tensor):
        return ops.schedule_matmul_int8(y)


@dataclass(frozen=True, slots=True)
class IntegerConv:
    """``ops.conv2d_int8`` (NCHW, or NHWC where ``in_layout`` / ``out_layout`` say so; one
    stride and one padding for both axes), or ``ops.conv2d_int8_packed`` on constant weights
    packed once.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 3, 6, 6), "uint8", name="X")
    >>> W = pl.placeholder((5, 3, 3, 3), "int8", name="W")
    >>> IntegerConv(Epilogue(a_zero=7, scale=0.5, out_dtype="uint8"), 2, 1)(X, W)
    Tensor(Y: uint8[1, 5, 3, 3])
    """

    epilogue: Epilogue
    stride: int = 1
    padding: int = 0
    weight: tuple[int, int, int, int] | None = None   # packed weights: the shape they had
    w_dtype: str = "int8"
    weight_sums: bool = False                         # the packed weights' sums follow them
    in_layout: str = "NCHW"                           # or "NHWC": channels last
    out_layout: str = "NCHW"

    def __call__(self, x: Tensor, w: Tensor, *rest: Tensor) -> Tensor:
        """``w``: the weights, or (``weight`` set) their panels by
        ``ops.pack_conv_int8_weight``, whose sums come first in ``rest`` where the input's
        zero point needs them."""
        e = self.epilogue
        args = e.arguments(list(rest[1:] if self.weight_sums else rest))
        common = dict(stride=self.stride, padding=self.padding, x_zero_point=args["a_zero"],
                      w_zero_point=args["b_zero"], bias=args["bias"], scale=args["scale"],
                      out_zero_point=e.out_zero, out_dtype=e.out_dtype,
                      in_layout=self.in_layout, out_layout=self.out_layout)
        if self.weight is not None:
            return ops.conv2d_int8_packed(x, w, rest[0] if self.weight_sums else None,
                                          self.weight, w_dtype=self.w_dtype, **common)
        return ops.conv2d_int8(x, w, **common)

    def library_schedule(self, y: Tensor):
        """The int8 recipe's schedule; None (the default schedule) where the recipe cannot
        tile this convolution."""
        try:
            return ops.schedule_conv2d_int8(y)
        except ScheduleError:
            return None


# elements of a flat integer addition summed by one vector loop of a parallel chunk
ADD_CHUNK = 4096


@dataclass(frozen=True, slots=True)
class IntegerAdd:
    """ONNX Runtime's ``QLinearAdd`` with one scale and zero point per tensor: ``a`` and ``b``
    dequantized, added and quantized again (``saturate(round((float32(a - za) * sa +
    float32(b - zb) * sb) / scale) + zero)``, halves to even), as the QDQ form computes it;
    ``a`` and ``b`` of one shape.

    >>> import polyloop as pl
    >>> A = pl.placeholder((10,), "uint8", name="A"); B = pl.placeholder((10,), "uint8", name="B")
    >>> IntegerAdd(0.5, 3, 0.25, 0, 1.0, 128, "uint8")(A, B)
    Tensor(Y: uint8[10])
    """

    a_scale: float
    a_zero: int
    b_scale: float
    b_zero: int
    scale: float
    zero: int
    out_dtype: str

    def __call__(self, a: Tensor, b: Tensor) -> Tensor:
        if [str(d) for d in a.shape] != [str(d) for d in b.shape]:
            raise ScheduleError(f"IntegerAdd: the operands have shapes {a.shape} and "
                                f"{b.shape}; one shape is needed")

        def value(*i):
            total = dequantize_linear(a[i], self.a_scale, self.a_zero) + \
                dequantize_linear(b[i], self.b_scale, self.b_zero)
            q = quantize_linear(total, self.scale, self.zero, self.out_dtype)
            # the saturated value as int32 (in range: the narrowing moves to the copy)
            return cast(DType.INT32, q.value) if isinstance(q, Cast) else q
        wide = te.compute(a.shape, value, name="E")
        return te.compute(a.shape, lambda *i: cast(DType(self.out_dtype), wide[i]), name="Y")

    def library_schedule(self, y: Tensor) -> Schedule:
        """Chunks of ``ADD_CHUNK`` elements of the last axis in parallel (a flat tensor: the
        whole addition is one loop); in each, the sums as int32 in one vector loop, then
        copied into the 8-bit result (a loop the C compiler vectorizes)."""
        sch = Schedule(y)
        *outer, last = sch.get_loops(y.name)
        chunk, lanes = sch.split(last, [None, ADD_CHUNK])
        sch.parallel(outer[0] if outer else chunk)
        sch.compute_at("E", chunk)
        sch.vectorize(sch.get_loops("E")[-1])
        sch.vectorize(lanes)
        return sch


@dataclass(frozen=True, slots=True)
class IntegerMaxPool:
    """A 2-D max pool of an 8-bit NHWC tensor (``Op.POOL``'s max on the integer activations
    of a quantized model, which a scale and zero point do not change): ``Y[n, y, x, c]`` the
    largest ``x[n, y * stride + r - pad_top, x * stride + s - pad_left, c]`` inside the input
    over the ``kernel`` window; the result's rows and columns are ``size``.

    >>> import polyloop as pl
    >>> X = pl.placeholder((1, 8, 8, 16), "uint8", name="X")
    >>> IntegerMaxPool((3, 3), (2, 2), (1, 1), (4, 4))(X)
    Tensor(Y: uint8[1, 4, 4, 16])
    """

    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: tuple[int, int]          # top, left (the bottom and right ones follow from size)
    size: tuple[int, int]

    def __call__(self, x: Tensor) -> Tensor:
        n, h, w, c = x.shape
        r = te.reduce_axis((0, self.kernel[0]), name="r")
        s = te.reduce_axis((0, self.kernel[1]), name="s")
        lowest = const(-128 if x.dtype is DType.INT8 else 0, x.dtype)

        def body(b, y, xx, ch):
            row = y * self.strides[0] + r - self.pads[0]
            col = xx * self.strides[1] + s - self.pads[1]
            inside = (row >= 0) & (row < h) & (col >= 0) & (col < w)
            return te.max(where(inside, x[b, row, col, ch], lowest), axis=[r, s])
        return te.compute((n, *self.size, c), body, name="Y")

    def library_schedule(self, y: Tensor) -> Schedule:
        """Output rows in parallel; per output pixel, the window's taps outermost and the
        channels one vector loop."""
        sch = Schedule(y)
        n, row, col, ch, r, s = sch.get_loops(y.name)
        init = sch.decompose_reduction(y.name, ch)
        sch.reorder(r, s, ch)
        sch.vectorize(ch)
        sch.vectorize(sch.get_loops(init)[-1])
        sch.parallel(row)
        return sch
