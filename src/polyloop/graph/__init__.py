# SPDX-License-Identifier: Apache-2.0
"""The graph level: import a model, fuse operators, lower each group to tensor expressions,
schedule, and run the whole model from one shared library.

>>> import numpy as np, polyloop as pl
>>> b = pl.graph.GraphBuilder("tiny")
>>> x = b.input("x", ("batch", 4))
>>> w = b.constant(np.eye(4, dtype="float32"), "w")
>>> g = b.build(b.emit(pl.graph.Op.RELU, b.emit(pl.graph.Op.LINEAR, x, w)))
>>> ex = pl.graph.build(g)
>>> ex(np.array([[1, -2, 3, -4]], "float32"))
array([[1., 0., 3., 0.]], dtype=float32)
"""
from . import passes
from .build import build, optimize
from .builder import GraphBuilder
from .executor import Executor
from .extern import register_extern
from .importers import from_onnx, from_torch
from .ir import Call, Constant, ExternCall, Graph, Kernel, KernelCall, Op, TensorType, Value
from .lower import lower_kernel
from .memory import plan_memory
from .quant import quantize
from .tune import GraphTuneResult, extract_tasks, tune

__all__ = ["Call", "Constant", "Executor", "ExternCall", "Graph", "GraphBuilder", "Kernel",
           "KernelCall", "Op", "TensorType", "Value", "build", "from_onnx", "from_torch",
           "lower_kernel", "optimize", "passes", "plan_memory", "quantize", "register_extern",
           "tune", "GraphTuneResult", "extract_tasks"]
