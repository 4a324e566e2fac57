# SPDX-License-Identifier: Apache-2.0
"""The C target's text: prologue, loop pragmas, temporaries, header, refusals."""
import pytest

from polyloop.codegen import generate_c, generate_c_header
from polyloop.errors import BuildError
from polyloop.ir.expr import BinOpKind, ReduceKind, Var, binop
from polyloop.ir.loops import Barrier, Block, If, Kernel, LoopKind, Store
from polyloop.ir.program import MemScope
from polyloop.ir.thread_axis import ThreadAxis

from .irbuild import F32, F64, I64, INOUT, OUT, TEMP, buf, c, loop, param

m, n = param("m"), param("n")
i, j = Var("i"), Var("j")


def lines(src: str) -> list[str]:
    return [line.strip() for line in src.splitlines()]


def vector_add(kind=LoopKind.SERIAL, **loop_options) -> Kernel:
    A, B, C = buf("A", (n,), F32), buf("B", (n,), F32), buf("C", (n,), F32, OUT)
    body = loop("i", n, Store("C", (i,), A[i] + B[i]), kind, **loop_options)
    return Kernel("vadd", (A, B, C), ("n",), (), body)


def test_vector_add_reads_like_hand_written_c():
    src = generate_c(vector_add())
    assert "#include <math.h>" in src and "#include <stdint.h>" in src
    assert "static inline" not in src  # no helper is used, none is defined
    body = src[src.index("static __attribute__((noinline)) int32_t pl_vadd_body"):]
    assert body.splitlines() == [
        "static __attribute__((noinline)) int32_t pl_vadd_body(const int64_t n, "
        "const float *restrict A, const float *restrict B, float *restrict C) {",
        "    for (int64_t i = 0; i < n; i++) {",
        "        C[i] = A[i] + B[i];",
        "    }",
        "",
        "    return 0;",
        "}",
        "",
        "int32_t vadd(void **args, const int64_t *params) {",
        "    if (vadd_check_sizes(params)) return 3;",
        "    const int64_t n = params[0];",
        "    const float *restrict A = (const float *)args[0];",
        "    const float *restrict B = (const float *)args[1];",
        "    float *restrict C = (float *)args[2];",
        "    return pl_vadd_body(n, A, B, C);",
        "}"]


def test_buffers_are_c99_array_pointers_and_0d_buffers_one_element_arrays():
    A = buf("A", (m, n, 3), F64, INOUT)
    S = buf("S", (), F32, OUT)
    body = Store("S", (), A[c(0, I64), c(1, I64), c(2, I64)].astype("float32"))
    src = generate_c(Kernel("k", (A, S), ("m", "n"), (), body))
    assert "double (*restrict A)[n][3] = (double (*)[n][3])args[0];" in lines(src)
    assert "float *restrict S = (float *)args[1];" in lines(src)
    assert "S[0] = (float)A[0][1][2];" in lines(src)


@pytest.mark.parametrize("kind, options, pragma", [
    (LoopKind.PARALLEL, {}, "#pragma omp parallel for schedule(static) "
                            "if(pl_max_i64(n, 0) >= 32768)"),     # little work: one thread
    (LoopKind.UNROLLED, {"unroll_factor": 4}, "#pragma GCC unroll 4"),
    (LoopKind.UNROLLED, {}, "#pragma GCC unroll 8"),
])
def test_loop_kinds_become_pragmas_on_their_loop(kind, options, pragma):
    src = lines(generate_c(vector_add(kind, **options)))
    assert src[src.index(pragma) + 1] == "for (int64_t i = 0; i < n; i++) {"


def test_full_unroll_of_a_constant_loop_uses_its_trip_count():
    A = buf("A", (10,), F32, OUT)
    body = loop("i", 10, Store("A", (i,), c(0.0, F32)), LoopKind.UNROLLED, start=1, step=2)
    src = lines(generate_c(Kernel("k", (A,), (), (), body)))
    assert src[src.index("#pragma GCC unroll 5") + 1] == "for (int64_t i = 1; i < 10; i += 2) {"


def test_reductions_update_in_place():
    A, S = buf("A", (n,), F32), buf("S", (len(ReduceKind),), F32, OUT)
    body = loop("i", n, Block(tuple(
        Store("S", (c(k, I64),), A[i], kind) for k, kind in enumerate(ReduceKind))))
    src = lines(generate_c(Kernel("k", (A, S), ("n",), (), body)))
    assert ["S[0] += A[i];", "S[1] = pl_max_f32(S[1], A[i]);",
            "S[2] = pl_min_f32(S[2], A[i]);", "S[3] *= A[i];"] == [
                s for s in src if s.startswith("S[")]


def test_if_else_chains_print_as_else_if():
    A = buf("A", (n,), I64, OUT)
    chain = If(i < 3, Store("A", (i,), c(0, I64)),
               If(i < 7, Store("A", (i,), c(1, I64)), Store("A", (i,), c(2, I64))))
    src = lines(generate_c(Kernel("k", (A,), ("n",), (), loop("i", n, chain))))
    start = src.index("if (i < 3) {")
    assert src[start:start + 7] == ["if (i < 3) {", "A[i] = 0;", "} else if (i < 7) {",
                                    "A[i] = 1;", "} else {", "A[i] = 2;", "}"]


def test_small_constant_temporaries_live_on_the_stack_others_on_the_heap():
    A = buf("A", (n,), F32, OUT)
    temps = (buf("T", (16, 16), F32, TEMP), buf("H", (n, 4), F64, TEMP),
             buf("G", (128, 256), F32, TEMP))  # 128 KiB: too big for the stack
    body = Block(tuple(Store(t.name, (c(0, I64),) * t.ndim, c(0.0, t.dtype)) for t in temps))
    src = lines(generate_c(Kernel("k", (A,), ("n",), temps, body)))
    assert "_Alignas(64) float T[16][16];" in src
    assert ("double (*restrict H)[4] = (double (*)[4])aligned_alloc(64, "
            "pl_alloc_bytes(sizeof(double), 2, (const int64_t[]){n, 4}));") in src
    assert ("float (*restrict G)[256] = (float (*)[256])aligned_alloc(64, "
            "pl_alloc_bytes(sizeof(float), 2, (const int64_t[]){128, 256}));") in src
    check = src.index("if (H == NULL || G == NULL) {")
    assert src[check + 1:check + 4] == ["free(H);", "free(G);", "return 1;"]
    end = src.index("int32_t k(void **args, const int64_t *params) {")
    assert src[end - 5:end] == ["free(H);", "free(G);", "return 0;", "}", ""]


def test_local_temporary_is_declared_in_the_loop_that_owns_it():
    A, B = buf("A", (n, 8), F32), buf("B", (n, 8), F32, OUT)
    T = buf("T", (8,), F32, TEMP, MemScope.LOCAL)
    body = loop("i", n, Block((
        loop("j", 8, Store("T", (j,), A[i, j] * 2.0)),
        loop("j", 8, Store("B", (i, j), T[7 - j])))), LoopKind.PARALLEL)
    src = generate_c(Kernel("k", (A, B), ("n",), (T,), body)).splitlines()
    start = src.index("    for (int64_t i = 0; i < n; i++) {")
    assert src[start + 1] == "        _Alignas(64) float T[8];"


def test_local_temporary_of_symbolic_shape_is_refused():
    A = buf("A", (n,), F32, OUT)
    T = buf("T", (n,), F32, TEMP, MemScope.LOCAL)
    body = loop("i", n, Store("T", (i,), c(0.0, F32)))
    with pytest.raises(BuildError, match="'T' has scope 'local'.*constant shape"):
        generate_c(Kernel("k", (A,), ("n",), (T,), body))


def test_notes_and_annotations_become_comments():
    kernel = vector_add(annotations=(("pragma_hint", "prefetch"),))
    kernel = Kernel(kernel.name, kernel.args, kernel.params, (), kernel.body,
                    notes=("schedule: split(i, 8)", "two\nlines"))
    src = lines(generate_c(kernel))
    assert src[1:4] == ["// schedule: split(i, 8)", "// two", "// lines"]
    assert src[src.index("// pragma_hint: prefetch") + 1].startswith("for (int64_t i")


def test_min_and_max_helpers_are_defined_once_and_only_when_used():
    A, B = buf("A", (n,), I64), buf("B", (n,), I64, OUT)
    value = binop(BinOpKind.MAX, binop(BinOpKind.MAX, A[i], c(0, I64)), i // 2)
    src = generate_c(Kernel("k", (A, B), ("n",), (), loop("i", n, Store("B", (i,), value))))
    assert src.count("int64_t pl_max_i64(int64_t a, int64_t b) {") == 1
    assert src.count("int64_t pl_floordiv_i64(int64_t a, int64_t b) {") == 1
    assert "pl_min" not in src and "pl_mod" not in src
    assert "B[i] = pl_max_i64(pl_max_i64(A[i], 0), pl_floordiv_i64(i, 2));" in lines(src)


def test_thread_loop_is_refused_on_the_c_target():
    kernel = vector_add(LoopKind.THREAD, thread=ThreadAxis.THREAD_X)
    with pytest.raises(BuildError, match=r"loop 'i' of kernel 'vadd' is bound to 'threadIdx.x'"
                                         r".*target \"cuda\" or \"opencl\", or remove"):
        generate_c(kernel)


def test_barrier_is_refused_on_the_c_target():
    kernel = Kernel("k", (), (), (), Barrier())
    with pytest.raises(BuildError, match="barrier, which only GPU targets have"):
        generate_c(kernel)


def test_kernel_name_must_be_a_c_identifier():
    kernel = Kernel("my-kernel", (), (), (), Block(()))
    with pytest.raises(BuildError, match="'my-kernel' is not usable as a C function name"):
        generate_c(kernel)


def test_header_declares_the_entry_and_documents_arguments():
    header = lines(generate_c_header(vector_add()))
    assert "//   args[2]  C: float32[n] (output)" in header
    assert "//   params[0]  n" in header
    assert "int32_t vadd(void **args, const int64_t *params);" in header
    assert header[-1] == "#endif  // POLYLOOP_VADD_H"
