# SPDX-License-Identifier: Apache-2.0
"""The model importers."""
from .onnx_import import from_onnx
from .from_torch import from_torch

__all__ = ["from_onnx", "from_torch"]
