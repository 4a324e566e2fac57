# SPDX-License-Identifier: Apache-2.0
"""The C-family printer: expressions with minimal parentheses, exact literals, target hooks."""
import pytest

from polyloop.codegen.cfamily import CFamilyPrinter
from polyloop.codegen.names import NameKind, Names
from polyloop.codegen.writer import CodeWriter
from polyloop.errors import BuildError
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import (BinOpKind, Reduce, ReduceKind, Unary, UnaryKind, Var, VarKind,
                              binop, select, unary)
from polyloop.ir.loops import Barrier, Block, Kernel, LoopKind, Store
from polyloop.ir.program import MemScope
from polyloop.ir.thread_axis import ThreadAxis

from .irbuild import F32, F64, I32, I64, OUT, TEMP, buf, c, loop, param

n = param("n")
x, y, z = (Var(name, dtype=F32, weak=False) for name in "xyz")
A = buf("A", (n, n), F32)


def printer(*buffers, params=("n",)) -> CFamilyPrinter:
    p = CFamilyPrinter(Kernel("k", tuple(buffers), params, (), Block(())))
    for name in "ijxyz":
        p.bound[name] = [name]  # as if inside loops over i, j, x, y, z
    return p


@pytest.mark.parametrize("build, text", [
    (lambda: (x + y) * z, "(x + y) * z"),
    (lambda: x + y * z, "x + y * z"),
    (lambda: x - y - z, "x - y - z"),
    (lambda: x - (y - z), "x - (y - z)"),
    (lambda: x / (y * z), "x / (y * z)"),
    (lambda: -(x + y), "-(x + y)"),
    (lambda: (x + y).astype("float64"), "(double)(x + y)"),
    (lambda: x.astype("float64") * 2.0, "(double)x * 2.0"),
    (lambda: (x < y) == (y < z), "(x < y) == (y < z)"),
    (lambda: (x < y) & (y < z) | (x > z), "(x < y && y < z) || x > z"),
    (lambda: ~(x < y), "!(x < y)"),
    (lambda: select(x > 0.0, x, y) + 1.0, "(x > 0.0f ? x : y) + 1.0f"),
    (lambda: Unary(UnaryKind.NEG, c(-1.5, F32), F32), "-(-1.5f)"),
    (lambda: binop(BinOpKind.MAX, x, y * z), "pl_max_f32(x, y * z)"),
])
def test_expressions_have_minimal_but_correct_parentheses(build, text):
    assert printer(A).expr(build()) == text


def test_loads_index_multidimensional_arrays():
    i, j = Var("i"), Var("j")
    assert printer(A).expr(A[i + 1, j * 2] * 2.0) == "A[i + 1][j * 2] * 2.0f"


def test_non_affine_loads_are_checked_per_dimension():
    i, j = Var("i"), Var("j")
    assert printer(A).expr(A[i + 1, j * n] * 2.0) == (
        "(pl_index_ok(pl_fault, 0, 0, (int64_t)(i + 1), n) && "
        "pl_index_ok(pl_fault, 0, 1, (int64_t)(j * n), n) ? A[i + 1][j * n] : (float)0) * 2.0f")


@pytest.mark.parametrize("value, dtype, text", [
    (1.5, F32, "1.5f"), (0.1, F32, "0.1f"), (1e-8, F32, "1e-08f"), (3.0, F32, "3.0f"),
    (0.1, F64, "0.1"), (-2.5, F64, "-2.5"), (1e300, F64, "1e+300"),
    (float("inf"), F32, "INFINITY"), (float("-inf"), F32, "-INFINITY"),
    (float("nan"), F32, "NAN"), (float("inf"), F64, "(double)INFINITY"),
    (float("-inf"), F64, "(double)-INFINITY"), (float("nan"), F64, "(double)NAN"),
    (7, I32, "7"), (-2**31, I32, "INT32_MIN"), (2**31 - 1, I32, "2147483647"),
    (2**40, I64, "INT64_C(1099511627776)"), (-2**63, I64, "INT64_MIN"), (-5, I64, "-5"),
    (True, DType.BOOL, "true"),
])
def test_literals_have_the_constants_dtype(value, dtype, text):
    assert printer().expr(c(value, dtype)) == text


def test_out_of_range_constant_is_refused():
    with pytest.raises(BuildError, match="does not fit in int32"):
        printer().expr(c(2**31, I32))


@pytest.mark.parametrize("op, dtype, fn", [
    (UnaryKind.EXP, F32, "expf"), (UnaryKind.EXP, F64, "exp"), (UnaryKind.LOG, F32, "logf"),
    (UnaryKind.SQRT, F32, "sqrtf"), (UnaryKind.TANH, F64, "tanh"), (UnaryKind.ABS, F32, "fabsf"),
    (UnaryKind.ABS, F64, "fabs"), (UnaryKind.ABS, I32, "abs"), (UnaryKind.ABS, I64, "llabs"),
    (UnaryKind.FLOOR, F32, "floorf"), (UnaryKind.FLOOR, F64, "floor"),
])
def test_math_functions_are_chosen_by_dtype(op, dtype, fn):
    v = Var("x", dtype=dtype, weak=False)
    assert printer().expr(unary(op, v)) == f"{fn}(x)"


def test_floor_division_and_modulo_call_typed_helpers():
    p = printer()
    i = Var("i")
    assert p.expr((i - 5) // 3 + i % 4) == "pl_floordiv_i64(i - 5, 3) + pl_mod_i64(i, 4)"
    assert p.expr(x // y) == "pl_floordiv_f32(x, y)"
    assert sorted(h.name for h in p.helpers) == ["pl_floordiv_f32", "pl_floordiv_i64",
                                                 "pl_mod_i64"]


def test_a_loop_and_a_parameter_with_the_same_name_get_different_c_names():
    p = CFamilyPrinter(Kernel("k", (), ("k",), (), Block(())))
    k_loop, k_param = Var("k"), Var("k", VarKind.PARAM)
    assert p.param("k") == "k"
    p.bound["k"] = ["k_1"]
    assert p.expr(k_loop + k_param) == "k_1 + k"


def test_names_are_made_valid_and_unique():
    names = Names({"args"})
    assert names.ident(NameKind.ITERATOR, "i.outer") == "i_outer"
    assert names.ident(NameKind.ITERATOR, "i_outer") == "i_outer_1"
    assert names.ident(NameKind.BUFFER, "args") == "args_"
    assert names.ident(NameKind.BUFFER, "0x") == "v0x"
    assert names.ident(NameKind.BUFFER, "pl_max_f32") == "pl_max_f32_"


@pytest.mark.parametrize("expr, message", [
    (lambda: Reduce(ReduceKind.SUM, x, (Var("i"),), (c(0, I64),), (n,), F32),
     "lowering turns reductions"),
    (lambda: buf("B", (4,), F32)[Var("i")], "buffer 'B', which is neither"),
    (lambda: Var("q") + 1, "loop variable 'q' outside of its loop"),
    (lambda: param("p") + 1, "size parameter 'p', which is not in its params"),
])
def test_malformed_expressions_are_refused_with_a_reason(expr, message):
    with pytest.raises(BuildError, match=message):
        printer(A).expr(expr())


class ToyGpuPrinter(CFamilyPrinter):
    """What an OpenCL printer overrides: a qualifier, the thread index and the barrier."""
    target = "toy-gpu"

    def address_space(self, buffer):
        return "__local " if buffer.scope is MemScope.SHARED else "__global "

    def thread_index(self, loop):
        return f"get_global_id({loop.thread.dim})"

    def barrier(self, node):
        return "barrier(CLK_LOCAL_MEM_FENCE)"


def test_gpu_targets_override_hooks_not_the_walk():
    i = Var("i")
    B = buf("B", (n,), F32, OUT)
    body = Block((loop("i", n, Store("B", (i,), c(1.0, F32)), LoopKind.THREAD, start=2,
                       thread=ThreadAxis.BLOCK_X), Barrier()))
    p = ToyGpuPrinter(Kernel("k", (B,), ("n",), (), body))
    w = CodeWriter()
    p.emit(w, body)
    assert w.text().splitlines() == [
        "{", "    const int64_t i = 2 + get_global_id(0);", "    if (i < n) {",
        "        B[i] = 1.0f;", "    }", "}", "barrier(CLK_LOCAL_MEM_FENCE);"]
    assert p.pointer_declaration(B, "p") == "__global float *restrict B = (__global float *)p"
    assert p.array_declaration(buf("S", (8, 8), F32, TEMP, MemScope.SHARED)) == \
        "_Alignas(64) __local float S[8][8]"
