# SPDX-License-Identifier: Apache-2.0
"""The graph IR: a function of dataflow bindings over typed values.

A ``Graph`` has inputs, constants (weights), bindings and outputs. A binding defines its
output values once, in order: an operator call (``Call``, an ``Op`` with attributes), a call
into a fused kernel (``KernelCall``: the caller allocates the outputs, the kernel fills them),
or a call to a registered extern function (``ExternCall``). Every value carries a shape and a
dtype; a dimension is an ``int`` or the name of a size parameter (a symbolic batch).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

Dim = int | str


class Op(enum.Enum):
    """The operators of the graph IR (see ``graph.oplib`` for their tensor expressions).

    The first group are the specific operators the fast recipes and fusion passes match on.
    The general operators below them are what importers map most of a model onto; their
    attributes (``graph.kinds`` holds the enums):

    - ``UNARY(x; fn: UnaryFn, alpha, beta, gamma, lo, hi, ...)``: an elementwise function.
    - ``BINARY(a, b; fn: BinaryFn)``: NumPy broadcasting, one dtype (comparisons give bool).
    - ``WHERE(cond, a, b)``: broadcast select; ``CAST(x; dtype)``: C conversion (float to
      integer truncates toward zero, to bool is ``x != 0``).
    - ``REDUCE(x; fn: ReduceFn, axes, keepdims)``; ``ARG_REDUCE(x; largest, axis, keepdims,
      last)``: int64 index of the max/min, the last of ties when ``last``;
      ``CUMSUM(x; axis, exclusive, reverse)``.
    - ``SLICE(x; begin, step)``: ``out[i] = x[begin + i * step]`` per axis, the result's
      shape says how many; ``PAD(x; pads, mode: PadMode, value)``: ``pads`` = begins then
      ends, negative ones crop; ``BROADCAST_TO(x; shape)``; ``TILE(x; repeats)``.
    - ``GATHER(x, idx; axis)``, ``GATHER_ELEMENTS(x, idx; axis)``, ``GATHER_ND(x, idx;
      batch_dims)``: negative indices count from the end; an index out of range is refused
      before the run when it is an input or a constant, and clamped into range otherwise.
    - ``ONE_HOT(idx, values; depth, axis)``: ``values[1]`` at the index, ``values[0]``
      elsewhere; ``TRILU(x; upper, k)``: the upper/lower triangle of the two last axes.
    - ``CONV(x, w[, b]; strides, pads, dilations, groups)``: 1-D to 3-D, ``pads`` begins then
      ends; ``CONV_TRANSPOSE(x, w[, b]; strides, pads, dilations, groups)``: its adjoint, the
      output size as the result's shape says (``output_padding`` widens it).
    - ``POOL(x; fn: PoolFn, kernel, strides, pads, dilations, count_include_pad, p,
      storage_order)``: windows over the axes after the two first, the output size as the
      result's shape says (ceil mode gives one more window that starts inside the input or
      its begin padding). Padding never enters a max; an average divides by the window's
      elements inside the input, or inside input and pads with ``count_include_pad``.
    - ``NORMALIZE(x[, scale[, bias]]; axes, eps, rms)``: ``(x - mean) / sqrt(var + eps)`` over
      ``axes`` (``x / sqrt(mean(x^2) + eps)`` with ``rms``), then ``* scale + bias``
      broadcast to x.
    - ``LRN(x; size, alpha, beta, bias)``: across channels (axis 1).
    - ``EINSUM(*xs; equation)``: the equation in explicit form, ``ij,jk->ik``.
    - ``RESIZE(x; mode: ResizeMode, coordinates: CoordinateMode, nearest: NearestMode, scales,
      cubic_a, exclude_outside, antialias, roi, extrapolation)``: output size per axis from
      the result's shape, the coordinate transform from the per-axis ``scales``; with
      ``antialias`` a downscale widens its linear or cubic filter by 1 / scale.
    - ``GRID_SAMPLE(x, grid; mode: ResizeMode, padding: SamplePadding, align_corners)``: x
      (N, C, spatial...) sampled at the normalised coordinates ``grid[n, out..., :]`` (in
      [-1, 1], the last spatial axis first), as ONNX's GridSample.
    - ``SCATTER_ELEMENTS(x, idx, updates; axis, fn: ScatterFn)``: x with ``updates[u]`` put
      at u's position with axis replaced by ``idx[u]``; ``SCATTER_ND(x, idx, updates; fn)``:
      ``updates[q, ...]`` put at ``x[idx[q, 0], ..., idx[q, k-1], ...]``. Indices as GATHER's.
    - ``BITCAST(x; dtype)``: the same bits read as another dtype of the same width;
      ``DET(x)``: determinants of the square matrices of the two last axes (up to 5 x 5).
    - ``TOPK(x; k, axis, largest, indices)``: the ``k`` largest (smallest) elements along
      ``axis`` in order, equal ones by position; their int64 positions with ``indices``.
    """

    CONV2D = "conv2d"
    LINEAR = "linear"
    MATMUL = "matmul"
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    RELU = "relu"
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    SIGMOID = "sigmoid"
    TANH = "tanh"
    SQRT = "sqrt"
    EXP = "exp"
    NEG = "neg"
    ERF = "erf"
    SOFTMAX = "softmax"
    LOG_SOFTMAX = "log_softmax"
    MAX_POOL2D = "max_pool2d"
    AVG_POOL2D = "avg_pool2d"
    ADAPTIVE_AVG_POOL2D = "adaptive_avg_pool2d"
    RESHAPE = "reshape"
    PERMUTE = "permute"
    CONCAT = "concat"
    BATCH_NORM = "batch_norm"
    LAYER_NORM = "layer_norm"
    MEAN = "mean"
    EMBEDDING = "embedding"
    ATTENTION = "attention"
    COPY = "copy"
    SELECT = "select"
    TE = "te"
    FOREIGN = "foreign"     # an imported call with no lowering (graph.foreign.Reference)
    UNARY = "unary"
    BINARY = "binary"
    WHERE = "where"
    CAST = "cast"
    REDUCE = "reduce"
    ARG_REDUCE = "arg_reduce"
    CUMSUM = "cumsum"
    SLICE = "slice"
    PAD = "pad"
    BROADCAST_TO = "broadcast_to"
    TILE = "tile"
    GATHER = "gather"
    GATHER_ELEMENTS = "gather_elements"
    GATHER_ND = "gather_nd"
    ONE_HOT = "one_hot"
    TRILU = "trilu"
    CONV = "conv"
    CONV_TRANSPOSE = "conv_transpose"
    POOL = "pool"
    NORMALIZE = "normalize"
    LRN = "lrn"
    EINSUM = "einsum"
    RESIZE = "resize"
    GRID_SAMPLE = "grid_sample"
    SCATTER_ELEMENTS = "scatter_elements"
    SCATTER_ND = "scatter_nd"
    TOPK = "topk"
    BITCAST = "bitcast"
    DET = "det"

    def __str__(self) -> str:
        return self.value


# Operators computed element by element from their inputs (each output element reads inputs at
# the same or broadcast index): fusion appends them to the kernel of their producer.
INJECTIVE = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.RELU, Op.GELU, Op.GELU_TANH,
                       Op.SIGMOID, Op.TANH, Op.SQRT, Op.EXP, Op.NEG, Op.ERF, Op.COPY, Op.BATCH_NORM,
                       Op.UNARY, Op.BINARY, Op.WHERE, Op.CAST})
# Operators that only reinterpret a contiguous buffer: no kernel, the output aliases the input.
VIEWS = frozenset({Op.RESHAPE})


@dataclass(frozen=True, slots=True)
class TensorType:
    """The shape (ints and size-parameter names) and dtype (``"float32"``...) of a value."""

    shape: tuple[Dim, ...]
    dtype: str = "float32"

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(d for d in self.shape if isinstance(d, str))

    def concrete(self, sizes: dict[str, int]) -> tuple[int, ...]:
        """The shape with size parameters replaced by their values."""
        return tuple(sizes[d] if isinstance(d, str) else d for d in self.shape)


@dataclass(frozen=True, slots=True)
class SizeRule:
    """What size parameter ``name`` may be: at least ``low``, at most ``high`` (None: no
    bound), and, for a size derived from others (``batch*seq`` after a reshape, ``seq - 1``
    after a slice), its value: the sum of ``coefficient * product of sizes`` over ``terms``.
    An input size has no terms; the executor computes derived sizes and checks every range
    when the model is called."""

    name: str
    low: int = 1
    high: int | None = None
    terms: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def __str__(self) -> str:
        rng = f"{self.low} <= {self.name}" + (f" <= {self.high}" if self.high is not None
                                               else "")
        if not self.terms:
            return f"size {rng}"
        expr = " + ".join(f"{c}*{'*'.join(ns)}" if ns else str(c) for c, ns in self.terms)
        return f"size {self.name} = {expr}; {rng}"

    def value(self, sizes: dict[str, int]) -> int:
        """The derived size from the others' values."""
        total = 0
        for coefficient, names in self.terms:
            term = coefficient
            for n in names:
                term *= sizes[n]
            total += term
        return total


@dataclass(frozen=True, slots=True)
class Value:
    """A named SSA value of the graph."""

    name: str
    type: TensorType

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True, slots=True, eq=False)
class Constant:
    """A weight: a value bound to a NumPy array (C-contiguous, the value's dtype)."""

    value: Value
    data: np.ndarray


def attrs_to_str(attrs: tuple[tuple[str, object], ...]) -> str:
    return ", ".join(f"{k}={getattr(v, '__qualname__', None) or repr(v)}" if callable(v)
                     else f"{k}={v!r}" for k, v in attrs)


@dataclass(frozen=True, slots=True)
class Call:
    """``outputs = op(inputs, **attrs)``."""

    outputs: tuple[Value, ...]
    op: Op
    inputs: tuple[Value, ...]
    attrs: tuple[tuple[str, object], ...] = ()

    def attr(self, key: str, default: object = None) -> object:
        return dict(self.attrs).get(key, default)

    def callee(self) -> str:
        return str(self.op)


@dataclass(frozen=True, slots=True)
class Kernel:
    """A fused group of operator calls, lowered together into one generated kernel: its
    parameters are the group's inputs, its results the values the rest of the graph uses."""

    name: str
    params: tuple[Value, ...]
    results: tuple[Value, ...]
    body: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class KernelCall:
    """``outputs = call_kernel(kernel, inputs)``: outputs allocated by the caller."""

    outputs: tuple[Value, ...]
    kernel: Kernel
    inputs: tuple[Value, ...]

    def callee(self) -> str:
        return f"call_kernel {self.kernel.name}"


@dataclass(frozen=True, slots=True)
class ExternCall:
    """``outputs = call_extern("env.conv2d", inputs, **attrs)``: a registered Python function."""

    outputs: tuple[Value, ...]
    name: str
    inputs: tuple[Value, ...]
    attrs: tuple[tuple[str, object], ...] = ()

    def callee(self) -> str:
        return f"call_extern {self.name!r}"


Binding = Call | KernelCall | ExternCall


@dataclass(frozen=True, slots=True, eq=False)
class Graph:
    """A model: inputs, constants, bindings in dataflow order, outputs.

    >>> import polyloop as pl
    >>> b = pl.graph.GraphBuilder("f")
    >>> x = b.input("x", ("n", 4))
    >>> y = b.emit(pl.graph.Op.RELU, x)
    >>> print(b.build(y))
    def f(%x: float32[n, 4]) -> float32[n, 4]:
        %relu = relu(%x)  # float32[n, 4]
        return %relu
    """

    name: str
    inputs: tuple[Value, ...]
    constants: tuple[Constant, ...]
    bindings: tuple[Binding, ...]
    outputs: tuple[Value, ...]
    params: tuple[str, ...] = field(default=())
    size_rules: tuple[SizeRule, ...] = field(default=())

    def __str__(self) -> str:
        return "\n".join(graph_lines(self))

    def constant_data(self) -> dict[str, np.ndarray]:
        return {c.value.name: c.data for c in self.constants}

    def replace(self, **changes: object) -> Graph:
        fields = {k: getattr(self, k) for k in ("name", "inputs", "constants", "bindings",
                                                  "outputs", "params", "size_rules")}
        fields.update(changes)
        return Graph(**fields)


def binding_line(b: Binding) -> str:
    outs = ", ".join(str(v) for v in b.outputs)
    args = ", ".join(str(v) for v in b.inputs)
    attrs = getattr(b, "attrs", ())
    extra = f", {attrs_to_str(attrs)}" if attrs else ""
    types = ", ".join(str(v.type) for v in b.outputs)
    return f"{outs} = {b.callee()}({args}{extra})  # {types}"


def graph_lines(g: Graph):
    """The deterministic text form: constants, kernels, then the function."""
    for c in g.constants:
        yield f"const %{c.value.name}: {c.value.type}"
    kernels = []
    for b in g.bindings:
        if isinstance(b, KernelCall) and b.kernel not in kernels:
            kernels.append(b.kernel)
    for k in kernels:
        params = ", ".join(f"{v}: {v.type}" for v in k.params)
        yield f"kernel {k.name}({params}):"
        for call in k.body:
            yield f"    {binding_line(call)}"
        yield f"    return {', '.join(str(v) for v in k.results)}"
    for rule in g.size_rules:
        yield str(rule)
    args = ", ".join(f"{v}: {v.type}" for v in g.inputs)
    rets = ", ".join(str(v.type) for v in g.outputs)
    yield f"def {g.name}({args}) -> {rets}:"
    for b in g.bindings:
        yield f"    {binding_line(b)}"
    yield f"    return {', '.join(str(v) for v in g.outputs)}"


def uses(g: Graph) -> dict[str, int]:
    """How many times each value is read (bindings and graph outputs)."""
    count: dict[str, int] = {}
    for b in g.bindings:
        for v in b.inputs:
            count[v.name] = count.get(v.name, 0) + 1
    for v in g.outputs:
        count[v.name] = count.get(v.name, 0) + 1
    return count
