# SPDX-License-Identifier: Apache-2.0
"""TVM's tutorial "Use Tensorize to Leverage Hardware Intrinsics", as it writes it: C = A B^T
(N, M, L = 1024, 512, 64), ``y`` split by 16, and the inner 16 x L product replaced by a call
of ``gemv_update``, a C function the tutorial compiles with clang and imports
(``pragma import_llvm``); then the reduce-update form: ``k`` split by 16 too, the intrinsic
updating a 16 x 16 block (its reset done by the compiler).

Where polyloop's spelling differs from the tutorial's, and why:
- an intrinsic is ``pl.TensorIntrin(description, implementation)``: the description is the
  ``pl.compute`` of the computation (the tutorial's ``intrin_gemv``'s ``c``), the
  implementation C source. polyloop calls it with its calling convention (the output, then
  the inputs in the order the body reads them, then the row stride of each 2-D operand):
  ``gemv_update_pl(float *c, const float *a, const float *b, int64_t b_stride)``, a two-line
  wrapper around the tutorial's ``gemv_update``, which stays as written. A reduction
  description is an update: polyloop initialises C itself (the tutorial's first version
  relies on C being passed in zeroed; its reduce-update version declares a reset);
- ``s[C].tensorize(yi, gemv)`` is ``sch.tensorize(yi, gemv)``; polyloop compiles the source
  into the kernel, so no ``import_llvm`` pragma (and no clang) is needed.

TVM 0.27 has no TE ``decl_tensor_intrin``: its side registers a ``TensorIntrin`` from TVMScript
(description and an implementation calling ``gemv_update`` through ``call_extern``) and imports
the same C function compiled by clang to LLVM IR with ``pragma_import_llvm``, as the tutorial
does. Without clang on the path the TVM rows say so.
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import polyloop as pl

from .common import Out, Port, inputs_of, rand

TUTORIAL = "Tensorize"
GEMV_UPDATE = """int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i) {
      for (int j = 0; j < l; ++j) {
          cc[i] += aa[j] * bb[i * stride + j];
      }
  }
  return 0;
}
"""


def gemv_intrin(m: int, l_: int) -> pl.TensorIntrin:
    """The tutorial's ``intrin_gemv(m, l)``: c[i] += sum_k a[k] * b[i, k]."""
    a = pl.placeholder((l_,), "float32", name="a")
    b = pl.placeholder((m, l_), "float32", name="b")
    k = pl.reduce_axis((0, l_), name="k")
    c = pl.compute((m,), lambda i: pl.sum(a[k] * b[i, k], axis=k), name="c")
    source = (f"static {GEMV_UPDATE}\n"
              f"static inline void gemv_update_{m}x{l_}(float *c, const float *a, "
              "const float *b, int64_t b_stride) {\n"
              f"    gemv_update(c, (float *)a, (float *)b, {m}, {l_}, (int)b_stride);\n}}\n")
    return pl.TensorIntrin(c, source, name=f"gemv_update_{m}x{l_}")


def tensorize_polyloop(n: int, m: int, l_: int, reduce_update: bool, factor: int = 16):
    A = pl.placeholder((n, l_), "float32", name="A")
    B = pl.placeholder((m, l_), "float32", name="B")
    k = pl.reduce_axis((0, l_), name="k")
    C = pl.compute((n, m), lambda i, j: pl.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = pl.Schedule(C)
    x, y, z = s.get_loops("C")
    yo, yi = s.split(y, factor=factor)
    if reduce_update:
        zo, zi = s.split(z, factor=factor)
        s.reorder(x, yo, zo, yi, zi)
        s.tensorize(yi, gemv_intrin(factor, factor))
    else:
        s.reorder(x, yo, yi, z)
        s.tensorize(yi, gemv_intrin(factor, l_))
    return s


def _llvm_ir() -> str | None:
    """The tutorial's gemv_update as LLVM IR, compiled by clang (None without clang)."""
    clang = next((c for c in ("clang", "clang-18", "clang-17", "clang-16", "clang-15",
                              "clang-14") if shutil.which(c)), None)
    if clang is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "gemv.cc", Path(d) / "gemv.ll"
        src.write_text('extern "C" ' + GEMV_UPDATE)
        subprocess.run([clang, "-O3", "-march=native", "-S", "-emit-llvm", "-o", str(out),
                        str(src)], check=True, capture_output=True)
        return out.read_text()


def _register_tvm_intrin(tvm: Any, m: int, l_: int) -> str:
    from tvm.script import tirx as T
    name = f"tutorial_gemv_{m}x{l_}"
    try:
        tvm.s_tir.TensorIntrin.get(name)
        return name
    except Exception:   # noqa: BLE001 - not registered yet
        pass

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        A = T.match_buffer(a, (l_,), offset_factor=1)
        B = T.match_buffer(b, (m, l_), offset_factor=1, strides=[T.int32(), 1])
        C = T.match_buffer(c, (m,), offset_factor=1)
        with T.sblock("root"):
            T.reads(C[0:m], A[0:l_], B[0:m, 0:l_])
            T.writes(C[0:m])
            for i, kk in T.grid(m, l_):
                with T.sblock("update"):
                    vi, vk = T.axis.remap("SR", [i, kk])
                    C[vi] = C[vi] + A[vk] * B[vi, vk]

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        s = T.int32()
        A = T.match_buffer(a, (l_,), offset_factor=1)
        B = T.match_buffer(b, (m, l_), offset_factor=1, strides=[s, 1])
        C = T.match_buffer(c, (m,), offset_factor=1)
        with T.sblock("root"):
            T.reads(C[0:m], A[0:l_], B[0:m, 0:l_])
            T.writes(C[0:m])
            T.evaluate(T.call_extern("int32", "gemv_update", C.access_ptr("w"),
                                     A.access_ptr("r"), B.access_ptr("r"), m, l_, s))
    tvm.s_tir.TensorIntrin.register(name, desc, impl)
    return name


def tensorize_tvm(tvm: Any, n: int, m: int, l_: int, reduce_update: bool,
                  factor: int = 16) -> Any:
    from tvm import te
    import tvm.s_tir as s_tir
    ll = _llvm_ir()
    if ll is None:
        raise RuntimeError("the TVM side needs clang to compile gemv_update to LLVM IR")
    A = te.placeholder((n, l_), name="A")
    B = te.placeholder((m, l_), name="B")
    k = te.reduce_axis((0, l_), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = s_tir.Schedule(te.create_prim_func([A, B, C]))
    blk = s.get_sblock("C")
    x, y, z = s.get_loops(blk)
    yo, yi = s.split(y, [None, factor])
    if reduce_update:
        zo, zi = s.split(z, [None, factor])
        s.reorder(x, yo, zo, yi, zi)
        s.decompose_reduction(blk, zo)
        s.tensorize(yi, _register_tvm_intrin(tvm, factor, factor))
    else:
        s.reorder(x, yo, yi, z)
        s.decompose_reduction(blk, yi)
        s.tensorize(yi, _register_tvm_intrin(tvm, factor, l_))
    s.annotate(x, "pragma_import_llvm", ll)
    return s.mod


def ports(n: int = 1024, m: int = 512, l_: int = 64) -> list[Port]:
    ins = inputs_of(rand(n, l_), rand(m, l_))
    out = (Out((n, m)),)
    ref = lambda a, b: a.astype(np.float64) @ b.T  # noqa: E731
    return [Port(TUTORIAL, name, "", ins, out, ref,
                 lambda ru=ru: tensorize_polyloop(n, m, l_, ru),
                 lambda tvm, ru=ru: tensorize_tvm(tvm, n, m, l_, ru), rtol=1e-4, atol=1e-4)
            for name, ru in (("gemv intrinsic", False), ("gemv reduce-update", True))]


def small_ports() -> list[Port]:
    return ports(37, 48, 32)
