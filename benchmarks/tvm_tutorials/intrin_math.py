# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "Intrinsics and Math Functions", as it writes it, on a CPU: ``B = exp(A)``
over ``n`` elements (symbolic; run at ``n = 2^22``), its unified intrinsic ``te.exp``, the
same through ``call_pure_extern("float32", "expf", ...)``, and an intrinsic of one's own,
``mylog``, lowered to ``log``.

Steps:
- ``exp, default``: ``te.compute(A.shape, lambda i: te.exp(A[i]))``, no schedule;
- ``exp, split by 64``: the tutorial splits by 64 and binds the parts to ``blockIdx.x`` /
  ``threadIdx.x``; on a CPU the outer part is parallel and the inner one vectorized;
- ``expf extern, split by 64`` and ``mylog, split by 64``: the same schedule.

Where polyloop's spelling differs from the tutorial's, and why:
- ``tvm.tir.call_pure_extern("float32", "expf", A[i])`` is a declared C function,
  ``pl.extern("expf", dtype="float32", args=["float32"], header="<math.h>")``: polyloop checks
  its argument types and includes its header;
- an intrinsic of one's own needs no registry in polyloop: ``mylog`` is a Python function
  that builds the expression (``pl.log``), which is what TVM's registered lowering rule
  rewrites ``tir.mylog`` into. polyloop's ``exp`` and ``log`` have vector forms (its own
  exp, glibc's libmvec log), so the vectorized loops stay vector code; a call of ``expf``
  declared by ``<math.h>`` in a vectorized loop is polyloop's ``exp`` there too. Outside a
  vectorized loop (``exp, default``) polyloop's ``exp`` is its own branch-free scalar code,
  which gcc vectorizes (TVM's LLVM vectorizes the loop too, but calls ``expf`` per lane).
TVM 0.27 writes the GPU binding as ``parallel``/``vectorize`` here too.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of

TUTORIAL = "Intrinsics and math functions"


def mylog(x: Any) -> Any:
    """The tutorial's own intrinsic: log, built where it is used."""
    return pl.log(x)


def math_polyloop(step: str) -> Any:
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    if step == "expf":
        expf = pl.extern("expf", dtype="float32", args=["float32"], header="<math.h>")
        B = pl.compute(A.shape, lambda i: expf(A[i]), name="B")
    elif step == "mylog":
        B = pl.compute(A.shape, lambda i: mylog(A[i]), name="B")
    else:
        B = pl.compute(A.shape, lambda i: pl.exp(A[i]), name="B")
    if step == "default":
        return B
    s = pl.Schedule(B)
    bx, tx = s.split(s.get_loops("B")[0], factor=64)
    s.parallel(bx)
    s.vectorize(tx)
    return s


def math_tvm(tvm: Any, step: str) -> Any:
    from tvm import te
    import tvm.s_tir as s_tir
    tirx = tvm.tirx
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    if step == "expf":
        B = te.compute(A.shape, lambda i: tirx.call_pure_extern("float32", "expf", A[i]),
                       name="B")
    elif step == "mylog":
        _register_mylog(tvm)
        B = te.compute(A.shape, lambda i: tirx.call_intrin("float32", "tirx.mylog", A[i]),
                       name="B")
    else:
        B = te.compute(A.shape, lambda i: te.exp(A[i]), name="B")
    s = s_tir.Schedule(te.create_prim_func([A, B]))
    if step != "default":
        bx, tx = s.split(s.get_loops(s.get_sblock("B"))[0], [None, 64])
        s.parallel(bx)
        s.vectorize(tx)
    return s.mod


_REGISTERED: list[bool] = []


def _register_mylog(tvm: Any) -> None:
    """The tutorial's ``tir.mylog``: a pure op whose lowering rule on the CPU calls log."""
    if _REGISTERED:
        return
    tirx = tvm.tirx
    tvm.ir.register_op_attr("tirx.mylog", "TCallEffectKind", tirx.CallEffectKind.Pure.value)
    tirx.register_intrin_lowering(
        "tirx.mylog", target="llvm",
        f=lambda op: tirx.call_intrin("float32", "tirx.log", op.args[0]), level=99)
    _REGISTERED.append(True)


def ports(n: int = 1 << 22) -> list[Port]:
    ins = inputs_of(lambda rng: (rng.random(n) * 4.0 - 2.0).astype(np.float32))
    logs = inputs_of(lambda rng: (rng.random(n) * 4.0 + 0.01).astype(np.float32))
    out = (Out((n,)),)
    steps = (("exp, default", "default", ins, np.exp), ("exp, split by 64", "split", ins, np.exp),
             ("expf extern, split by 64", "expf", ins, np.exp),
             ("mylog, split by 64", "mylog", logs, np.log))
    return [Port(TUTORIAL, name, "", inp, out, lambda a, f=f: f(a.astype(np.float64)),
                 lambda step=step: math_polyloop(step),
                 lambda tvm, step=step: math_tvm(tvm, step), rtol=1e-5, atol=1e-6)
            for name, step, inp, f in steps]


def small_ports() -> list[Port]:
    return ports(1001)
