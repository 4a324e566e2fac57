# SPDX-License-Identifier: Apache-2.0
"""Static post-training quantization by polyloop (``pl.graph.quantize``): calibration on the
float graph, scales and zero points as ONNX Runtime's tool chooses them, and each layer folded
into an integer kernel by the importer's QDQ fold."""
from .api import Plan, apply, plan, quantize

__all__ = ["Plan", "apply", "plan", "quantize"]
