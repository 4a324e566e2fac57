# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "External Tensor Functions", as it writes it: a matrix product computed by a
library (``te.extern`` calling ``tvm.contrib.cblas.matmul``) followed by a bias added by the
compiler, ``D = C + bias`` (n = 1024, l = 128, m = 235, the tutorial's sizes); and a tensor
function written in Python (``my_tvm_addone``: ``B = A + 1``) called from the compiled code.

Where polyloop's spelling differs from the tutorial's, and why:
- an external tensor function is a call in polyloop's graph IR: ``GraphBuilder.emit_extern``
  of a function registered with ``pl.graph.register_extern`` (TVM: ``te.extern`` with
  ``call_packed`` of a function registered with ``tvm.register_func``); the bias is
  ``emit_te`` of a ``pl.compute``, and ``pl.graph.build`` compiles it;
- the TVM wheel has no BLAS (``tvm.contrib.cblas.matmul`` is missing), so both tools call the
  same library product: NumPy's ``matmul`` (OpenBLAS), registered as
  ``tvm.contrib.cblas.matmul`` in TVM and as ``env.matmul`` in polyloop;
- the tutorial's bias is a scalar ``te.var``; polyloop's graph inputs are tensors, so it is a
  0-d array.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "External tensor functions"


def _np_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b)


def matmul_bias_polyloop() -> Any:
    pl.graph.register_extern("env.matmul", _np_matmul)
    b = pl.graph.GraphBuilder("extern_matmul")
    A = b.input("A", ("n", "l"))
    B = b.input("B", ("l", "m"))
    bias = b.input("bias", ())
    C = b.emit_extern("env.matmul", A, B, out_type=pl.graph.TensorType(("n", "m"), "float32"))
    D = b.emit_te(lambda c, s: pl.compute(c.shape, lambda i, j: c[i, j] + s[()], name="D"),
                  C, bias)
    return pl.graph.build(b.build(D))


def addone_polyloop() -> Any:
    pl.graph.register_extern("env.add", lambda x, y: x + y)
    b = pl.graph.GraphBuilder("addone")
    A = b.input("A", ("n",))
    one = b.constant(np.ones((), np.float32), "one")
    B = b.emit_extern("env.add", A, one, out_type=pl.graph.TensorType(("n",), "float32"))
    return pl.graph.build(b.build(B))


def matmul_bias_tvm(tvm: Any) -> Any:
    from tvm import te
    _register(tvm)
    n, l_, m = te.var("n"), te.var("l"), te.var("m")
    A = te.placeholder((n, l_), name="A")
    B = te.placeholder((l_, m), name="B")
    bias = te.placeholder((), name="bias")
    C = te.extern((n, m), [A, B], lambda ins, outs: tvm.tirx.call_packed(
        "tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], False, False), name="C")
    D = te.compute(C.shape, lambda i, j: C[i, j] + bias[()], name="D")
    return tvm.IRModule({"main": te.create_prim_func([A, B, bias, D])})


def addone_tvm(tvm: Any) -> Any:
    from tvm import te
    _register(tvm)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.extern(A.shape, [A], lambda ins, outs: tvm.tirx.call_packed(
        "tvm.contrib.my_tvm_addone", ins[0], outs[0]), name="C")
    return tvm.IRModule({"main": te.create_prim_func([A, B])})


_DONE: list[bool] = []


def _register(tvm: Any) -> None:
    if _DONE:
        return

    def cblas_matmul(a: Any, b: Any, c: Any, ta: bool, tb: bool) -> None:
        c.copyfrom(np.matmul(a.numpy(), b.numpy()))

    def my_tvm_addone(x: Any, y: Any) -> None:
        tvm.runtime.tensor(x.numpy() + 1).copyto(y)
    tvm.register_global_func("tvm.contrib.cblas.matmul", cblas_matmul, override=True)
    tvm.register_global_func("tvm.contrib.my_tvm_addone", my_tvm_addone, override=True)
    _DONE.append(True)


def ports(n: int = 1024, l_: int = 128, m: int = 235) -> list[Port]:
    bias = lambda rng: np.asarray(rng.random() - 0.5, dtype=np.float32)  # noqa: E731
    return [
        Port(TUTORIAL, "cblas matmul + bias", "", inputs_of(rand(n, l_), rand(l_, m), bias),
             (Out((n, m)),), lambda a, b, s: a.astype(np.float64) @ b + s,
             matmul_bias_polyloop, matmul_bias_tvm, rtol=1e-4, atol=1e-4),
        Port(TUTORIAL, "my_tvm_addone (Python)", "", inputs_of(rand(n * 16)),
             (Out((n * 16,)),), lambda a: a + 1, addone_polyloop, addone_tvm),
    ]


def small_ports() -> list[Port]:
    return ports(37, 13, 23)
