# SPDX-License-Identifier: Apache-2.0
"""The operator library: each graph operator as tensor expressions (``pl.compute``).

``LOWERINGS[op](inputs, attrs, shape, name)`` returns the result tensor of ``op`` applied to
te tensors ``inputs``.
"""
from ..ir import Op
from .custom import CUSTOM
from .einsum import EINSUM
from .elementwise import ELEMENTWISE
from .math import MATH
from .movement import MOVEMENT
from .nn import NN
from .norm import NORM
from .reduce import REDUCE
from .resize import RESIZE
from .sample import SAMPLE
from .scatter import SCATTER
from .tensor import TENSOR
from .window import WINDOW

LOWERINGS = {Op(k): v for table in (ELEMENTWISE, NN, TENSOR, CUSTOM, MATH, REDUCE, MOVEMENT,
                                    WINDOW, NORM, EINSUM, RESIZE, SAMPLE,
                                    SCATTER) for k, v in table.items()}

__all__ = ["LOWERINGS"]
