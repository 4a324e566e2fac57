# SPDX-License-Identifier: Apache-2.0
"""L5: code generators. One C-family printer; each target is a table plus a few hooks."""
from .c import generate_c, generate_c_header, generate_c_unit

__all__ = ["generate_c", "generate_c_header", "generate_c_unit"]
