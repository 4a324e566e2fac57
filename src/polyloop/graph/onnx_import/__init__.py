# SPDX-License-Identifier: Apache-2.0
"""The ONNX importer: a table of converters per operator type onto the graph IR."""
from .importer import CONVERTERS, from_onnx
from .node import ValueNeeded

__all__ = ["CONVERTERS", "ValueNeeded", "from_onnx"]
