# SPDX-License-Identifier: Apache-2.0
"""The operator library: each graph operator as tensor expressions (``pl.compute``).

``LOWERINGS[op](inputs, attrs, shape, name)`` returns the result tensor of ``op`` applied to
te tensors ``inputs``.
"""
from ..ir import Op
from .custom import CUSTOM
from .elementwise import ELEMENTWISE
from .nn import NN
from .tensor import TENSOR

LOWERINGS = {Op(k): v for table in (ELEMENTWISE, NN, TENSOR, CUSTOM) for k, v in table.items()}

__all__ = ["LOWERINGS"]
