# SPDX-License-Identifier: Apache-2.0
"""What gcc makes of the generated C: vectorized loops, no warnings, a matching header."""
import re

from polyloop.codegen import generate_c, generate_c_header
from polyloop.ir.expr import BinOpKind, ReduceKind, Var, binop
from polyloop.ir.loops import Block, Kernel, LoopKind, Store
from polyloop.ir.program import MemScope

from .irbuild import F32, F64, OUT, TEMP, buf, c, loop, param

m, n = param("m"), param("n")
i, j = Var("i"), Var("j")


def line_of(src: str, text: str) -> int:
    """1-based line number of the first line that contains ``text``."""
    return next(no for no, line in enumerate(src.splitlines(), 1) if text in line)


def test_vectorized_loop_is_explicit_vector_code(compile_c):
    A, B = buf("A", (m, n), F32), buf("B", (m, n), F32, OUT)
    inner = loop("j", n, Store("B", (i, j), binop(BinOpKind.MAX, A[i, j] * 2.0, c(0.0, F32))),
                 LoopKind.VECTORIZED)
    src = generate_c(Kernel("relu2", (A, B), ("m", "n"), (), loop("i", m, inner)))
    compile_c(src)
    assert re.search(r"pl_store_v\d+f\(&B\[i\]\[j\], pl_max_v\d+f\(", src), src
    assert "#pragma omp simd" not in src


def test_vectorized_loop_left_to_gcc_is_vectorized_by_gcc(compile_c):
    """A stride-2 read has no explicit vector form: the loop stays under omp simd, and gcc
    vectorizes it."""
    A, B = buf("A", (m, 2 * n), F32), buf("B", (m, n), F32, OUT)
    inner = loop("j", n, Store("B", (i, j), A[i, j * 2] * 2.0), LoopKind.VECTORIZED)
    src = generate_c(Kernel("even2", (A, B), ("m", "n"), (), loop("i", m, inner)))
    _, log = compile_c(src, ["-fopt-info-vec-optimized"])
    j_loop = line_of(src, "for (int64_t j = 0; j < n; j++)")
    reported = {int(no) for no in re.findall(r"\.c:(\d+):\d+: optimized: loop vectorized", log)}
    assert reported & {j_loop, j_loop + 1}, log  # gcc names the loop or its statement


def test_generated_code_is_warning_free(compile_c):
    A, B = buf("A", (m, 16), F32), buf("B", (m,), F32, OUT)
    T = buf("T", (16,), F32, TEMP, MemScope.LOCAL)
    H = buf("H", (m, n), F64, TEMP)
    body = loop("i", m, Block((
        Store("B", (i,), c(0.0, F32)),
        loop("j", 16, Store("T", (j,), A[i, j] // 3.0 + (j % 7).astype("float32"))),
        loop("j", 16, Store("B", (i,), T[j], ReduceKind.MIN), LoopKind.UNROLLED),
        loop("j", n, Store("H", (i, j), c(1.0, F64)), LoopKind.VECTORIZED))),
        LoopKind.PARALLEL)
    src = generate_c(Kernel("k", (A, B), ("m", "n"), (T, H), body))
    _, log = compile_c(src, ["-Wall", "-Wextra", "-pedantic", "-Wno-unused-parameter"])
    assert "warning" not in log, log


def test_header_matches_the_definition(compile_c, tmp_path):
    A, B = buf("A", (n,), F32), buf("B", (n,), F32, OUT)
    kernel = Kernel("scale", (A, B), ("n",), (), loop("i", n, Store("B", (i,), A[i] * 3.0)))
    (tmp_path / "scale.h").write_text(generate_c_header(kernel))
    compile_c('#include "scale.h"\n' + generate_c(kernel), [f"-I{tmp_path}", "-Werror"])
