# SPDX-License-Identifier: Apache-2.0
"""Graph passes, each a function ``Graph -> Graph``: print the graph before and after."""
from .conv_pool_dense import conv_pool_dense_schedule, fuse_conv_pool_dense
from .conv_epilogue import conv_epilogue_schedule, fold_conv_epilogues
from .dce import remove_dead_code
from .fold import fold_constants
from .fuse import fuse_into_consumers, fuse_operators
from .dense_split import dense_split_schedule
from .dense_pad import pad_dense_columns
from .pool_fusion import conv_pool_schedule, fuse_conv_pool
from .pool_overlap import conv_overlapping_pool_schedule, fuse_conv_overlapping_pool
from .library import (library_conv, library_matmul, packed_columns, packed_conv,
                      use_library_kernels)

__all__ = ["conv_epilogue_schedule", "fold_conv_epilogues", "fold_constants", "fuse_into_consumers", "fuse_operators", "library_conv", "library_matmul", "packed_conv",
           "packed_columns", "remove_dead_code",
           "use_library_kernels"]
__all__ += ["conv_pool_schedule", "dense_split_schedule", "fuse_conv_pool"]
__all__ += ["conv_overlapping_pool_schedule", "fuse_conv_overlapping_pool"]
__all__ += ["conv_pool_dense_schedule", "fuse_conv_pool_dense"]
__all__ += ["pad_dense_columns"]
