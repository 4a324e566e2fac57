# SPDX-License-Identifier: Apache-2.0
"""Graph passes, each a function ``Graph -> Graph``: print the graph before and after."""
from .dce import remove_dead_code
from .fold import fold_constants
from .fuse import fuse_operators

__all__ = ["fold_constants", "fuse_operators", "remove_dead_code"]
