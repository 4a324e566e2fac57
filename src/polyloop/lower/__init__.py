# SPDX-License-Identifier: Apache-2.0
"""L4: a scheduled program -> a Kernel (loop AST, arguments, temporaries)."""
from .lower import lower

__all__ = ["lower"]
