# SPDX-License-Identifier: Apache-2.0
"""polyloop: a compiler for loop and tensor programs with exact polyhedral legality checks.

>>> import numpy as np, polyloop as pl
>>> n = pl.var("n")
>>> A = pl.placeholder((n, n), "float32", name="A")
>>> B = pl.compute((n, n), lambda i, j: A[j, i] * 2.0, name="B")
>>> mod = pl.build(B)
>>> a = np.arange(6, dtype="float32").reshape(2, 3)
>>> mod(np.ones((4, 4), "float32")).shape
(4, 4)
"""
from .driver import build
from .errors import (ArgumentError, BrokenDependence, BuildError, DeviceError, DTypeError,
                     IndexOutOfBounds, ParseError, PolyloopError, ScheduleError)
from .frontend.te import (Tensor, compute, max, min, placeholder, reduce_axis, sum,  # noqa: A004
                          to_program, var)
from .frontend.script import alloc, script
from .frontend.te_scan import scan
from .frontend.te_reducer import comm_reducer
from .frontend.te_reducer import argmax, argmin
from .frontend.te_tuple import max_value, min_value
from .ir.extern import extern
from .frontend.kernel import ArrayArg, LoopKernel, ValueArg, make_kernel
from .ir.dtypes import DType
from .ir.elementwise import (abs, const, exp, log, maximum, minimum, sqrt, tanh,  # noqa: A004
                             where)
from .ir.program import Buffer, BufferRole, MemScope, Program, Statement
from .schedule import BlockHandle, LoopHandle, Schedule, Trace
from .schedule.analysis import dependences
from .schedule.auto import auto_schedule
from .schedule.intrin_registry import TensorIntrin
from .runtime.target import Target
from .tune import TuneResult, tune
from . import graph  # noqa: F401 - pl.graph: the graph level
from . import intrin  # noqa: F401 - registers the built-in micro-kernels for trace replay
from .ir.elementwise import (ceil, cos, erf, floor, fmod, isnan, pow, round, sigmoid,  # noqa: A004
                             sin, tan)
from .schedule.kernel import (add_prefetch, assume, fix_parameters, join_inames, rename_iname,
                              split_iname, tag_inames)
from .schedule.kernel import prioritize_loops, set_temporary_address_space
from .schedule.kernel_precompute import precompute
from .frontend.kernel_rules import extract_subst

__all__ = [
    "ArgumentError", "BlockHandle", "Buffer", "BufferRole", "BuildError", "DType", "DTypeError",
    "DeviceError", "IndexOutOfBounds",
    "LoopHandle", "MemScope", "ParseError", "PolyloopError", "Program", "Schedule",
    "ScheduleError", "Statement", "Tensor", "Trace", "abs", "build", "compute", "const",
    "dependences", "exp", "log", "max", "maximum", "min", "minimum", "placeholder",
    "reduce_axis", "sqrt", "sum", "tanh", "to_program", "var", "where",
]
__all__ += ["alloc", "auto_schedule", "script"]
__all__ += ["TensorIntrin", "BrokenDependence", "Target"]
__all__ += ["TuneResult", "tune"]
__all__ += ["ArrayArg", "LoopKernel", "ValueArg", "add_prefetch", "assume", "fix_parameters",
            "join_inames", "make_kernel", "rename_iname", "split_iname", "tag_inames"]
__all__ += ["comm_reducer", "extern", "scan"]
__all__ += ["argmax", "argmin", "max_value", "min_value"]
__all__ += ["prioritize_loops", "set_temporary_address_space"]
__all__ += ["extract_subst", "precompute"]
__all__ += ["ceil", "cos", "erf", "floor", "fmod", "isnan", "pow", "round", "sigmoid", "sin",
            "tan"]


def __getattr__(name: str):
    """``pl.viz`` is imported on first use (it is the top layer and draws with matplotlib), and
    so is ``pl.rpc`` (devices: sockets, servers, a tracker)."""
    if name in ("viz", "rpc"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'polyloop' has no attribute {name!r}")
