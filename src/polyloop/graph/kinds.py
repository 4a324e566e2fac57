# SPDX-License-Identifier: Apache-2.0
"""The kinds that parametrise the general graph operators (``Op.UNARY``'s function,
``Op.REDUCE``'s reduction, ``Op.POOL``'s window function, ...).

Each is an enum whose value is its one spelling in the graph's text form; importers turn
their own names (ONNX op types, ATen names) into these once, at the edge.
"""
from __future__ import annotations

import enum


class _Kind(enum.Enum):
    def __repr__(self) -> str:
        return self.value

    __str__ = __repr__


class UnaryFn(_Kind):
    """Elementwise functions of one tensor (``Op.UNARY``). Parameters are attributes of the
    call: ``alpha``/``beta``/``gamma`` for the activations that take them, ``lo``/``hi`` for
    ``CLIP`` (None: unbounded), ``bias``/``lambd`` for ``SHRINK``, ``detect_positive``/
    ``detect_negative`` for ``ISINF``. Integer tensors take ABS, NEG, SIGN, RELU, CLIP and
    BITWISE_NOT; bool tensors NOT; every other function needs a float tensor."""

    ABS = "abs"
    NEG = "neg"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    RECIPROCAL = "reciprocal"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"              # halves to even
    SIGN = "sign"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    TANH = "tanh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    ERF = "erf"
    SIGMOID = "sigmoid"
    RELU = "relu"
    SOFTPLUS = "softplus"        # log(1 + exp(x))
    SOFTSIGN = "softsign"        # x / (1 + |x|)
    ELU = "elu"                  # alpha
    SELU = "selu"                # alpha, gamma
    CELU = "celu"                # alpha
    LEAKY_RELU = "leaky_relu"    # alpha
    HARD_SIGMOID = "hard_sigmoid"    # max(0, min(1, alpha * x + beta))
    HARD_SWISH = "hard_swish"    # x * max(0, min(1, x / 6 + 1 / 2))
    SILU = "silu"                # x * sigmoid(alpha * x), alpha 1 unless given
    MISH = "mish"                # x * tanh(softplus(x))
    GELU = "gelu"                # exact (erf)
    GELU_TANH = "gelu_tanh"      # the tanh approximation
    CLIP = "clip"                # lo, hi
    THRESHOLDED_RELU = "thresholded_relu"    # x where x > alpha, else 0
    SHRINK = "shrink"            # x + bias where x < -lambd, x - bias where x > lambd, else 0
    NOT = "not"
    ISNAN = "isnan"
    ISINF = "isinf"              # detect_positive, detect_negative
    BITWISE_NOT = "bitwise_not"


class BinaryFn(_Kind):
    """Elementwise functions of two broadcast tensors of one dtype (``Op.BINARY``).

    Integer ``DIV`` truncates toward zero; ``MOD`` takes the divisor's sign (Python's ``%``),
    ``FMOD`` the dividend's (C's ``fmod``); an integer division or remainder by zero gives 0.
    Comparisons give bool; AND, OR, XOR take bool tensors; the BIT* and SHIFT functions take
    integer tensors (shifts by the bit width or more give 0). ``POW`` computes in float64 for
    integers. ``PRELU`` is ``a`` where ``a >= 0``, else ``a * b``."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    MOD = "mod"
    FMOD = "fmod"
    AND = "and"
    OR = "or"
    XOR = "xor"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    BITAND = "bitand"
    BITOR = "bitor"
    BITXOR = "bitxor"
    SHIFT_LEFT = "shift_left"
    SHIFT_RIGHT = "shift_right"
    PRELU = "prelu"

    @property
    def is_comparison(self) -> bool:
        return self in (BinaryFn.EQ, BinaryFn.NE, BinaryFn.LT, BinaryFn.LE, BinaryFn.GT,
                        BinaryFn.GE)


class ReduceFn(_Kind):
    """Reductions over a set of axes (``Op.REDUCE``)."""

    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    MIN = "min"
    PROD = "prod"
    L1 = "l1"                    # sum of |x|
    L2 = "l2"                    # sqrt of the sum of squares
    SUM_SQUARE = "sum_square"
    LOG_SUM = "log_sum"          # log of the sum
    LOG_SUM_EXP = "log_sum_exp"  # log of the sum of exp(x), computed from the maximum


class PoolFn(_Kind):
    """What a pooling window computes (``Op.POOL``): ARGMAX is the flat index of the
    maximum in its (N, C, spatial...) tensor, the first of ties, as int64."""

    MAX = "max"
    AVG = "avg"
    LP = "lp"                    # (sum of |x|^p)^(1/p), attribute p
    ARGMAX = "argmax"


class PadMode(_Kind):
    """How ``Op.PAD`` fills the border."""

    CONSTANT = "constant"
    REFLECT = "reflect"          # mirrored, the edge element not repeated
    EDGE = "edge"                # the edge element repeated
    WRAP = "wrap"                # the other end of the axis


class ResizeMode(_Kind):
    """Interpolation of ``Op.RESIZE``."""

    NEAREST = "nearest"
    LINEAR = "linear"
    CUBIC = "cubic"


class CoordinateMode(_Kind):
    """How ``Op.RESIZE`` maps an output coordinate to an input one (as ONNX's
    ``coordinate_transformation_mode``)."""

    HALF_PIXEL = "half_pixel"
    HALF_PIXEL_SYMMETRIC = "half_pixel_symmetric"
    PYTORCH_HALF_PIXEL = "pytorch_half_pixel"
    ALIGN_CORNERS = "align_corners"
    ASYMMETRIC = "asymmetric"
    TF_CROP_AND_RESIZE = "tf_crop_and_resize"


class NearestMode(_Kind):
    """How nearest interpolation rounds a fractional input coordinate."""

    ROUND_PREFER_FLOOR = "round_prefer_floor"
    ROUND_PREFER_CEIL = "round_prefer_ceil"
    FLOOR = "floor"
    CEIL = "ceil"


class SamplePadding(_Kind):
    """What ``Op.GRID_SAMPLE`` reads outside the input."""

    ZEROS = "zeros"              # zero
    BORDER = "border"            # the nearest edge element
    REFLECTION = "reflection"    # the element mirrored at the border


class ScatterFn(_Kind):
    """How ``Op.SCATTER_ELEMENTS`` / ``Op.SCATTER_ND`` combine an update with the data:
    NONE replaces it (the last update of a position wins); the others fold every update of
    a position into the data."""

    NONE = "none"
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"
