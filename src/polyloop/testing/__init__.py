# SPDX-License-Identifier: Apache-2.0
"""Testing tools: the reference interpreter that every test compares compiled code with."""
from .interpret import interpret

__all__ = ["interpret"]
