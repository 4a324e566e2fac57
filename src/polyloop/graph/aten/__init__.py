# SPDX-License-Identifier: Apache-2.0
"""Converters of ATen operators (core ATen, after ``torch.export``'s decompositions) onto the
graph IR, one table per kind, keyed by the operator's name without its overload
(``"convolution"`` for ``aten.convolution.default``).

A converter takes a ``Call`` and returns the result value (a tuple for several results);
``Unsupported`` keeps the call as a foreign operator with its reason.
"""
from .context import Call, Converter, Unsupported, op_name
from .math import MATH
from .movement import MOVEMENT
from .nn import NN
from .quantized import QUANTIZED
from .reduce import REDUCE
from .shape import SHAPE

CONVERTERS: dict[str, Converter] = {**MATH, **MOVEMENT, **REDUCE, **NN, **SHAPE, **QUANTIZED}

# Composite operators whose decomposition would lose a form the graph compiles well: kept
# whole by ``torch.export``'s decompositions when a converter takes them in one piece.
KEEP_WHOLE = tuple(name for name in (
    "linear", "layer_norm", "scaled_dot_product_attention", "matmul", "silu", "group_norm",
    "upsample_nearest2d", "upsample_bilinear2d", "hardswish", "hardsigmoid", "mish",
    "softplus", "rms_norm", "triu", "tril") if name in CONVERTERS)

# Calls that only check metadata at run time and return nothing: skipped.
ASSERTS = ("_assert_tensor_metadata", "_assert_scalar", "_assert_async",
           "sym_constrain_range", "sym_constrain_range_for_size")

__all__ = ["ASSERTS", "CONVERTERS", "Call", "Converter", "KEEP_WHOLE", "Unsupported", "op_name"]
