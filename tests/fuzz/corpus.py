# SPDX-License-Identifier: Apache-2.0
"""The programs and the random schedule steps of the differential schedule fuzzer, shared with
the sanitizer run: programs from all three front ends (tensor expressions, kernels in ISL
syntax, scripts), each with random inputs of given sizes, and a decoder that turns a list of
(primitive, choice) integer pairs into schedule primitives with random arguments."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

import numpy as np

import polyloop as pl


# programs ------------------------------------------------------------------------------------

def _chain():
    """Elementwise chain of three statements with a reversed read."""
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    B = pl.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = pl.compute((n, m), lambda i, j: pl.where(B[i, j] > 0.0, B[i, j], -B[i, j])
                   * A[i, m - 1 - j], name="C")
    return pl.compute((n, m), lambda i, j: pl.maximum(C[i, j], B[i, j]) - 0.5, name="D")


def _matmul_relu():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    return pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")


def _row_softmax():
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float64", name="A")
    k = pl.reduce_axis((0, m), name="k")
    M = pl.compute((n,), lambda i: pl.max(A[i, k], axis=k), name="M")
    E = pl.compute((n, m), lambda i, j: pl.exp(A[i, j] - M[i]), name="E")
    r = pl.reduce_axis((0, m), name="r")
    S = pl.compute((n,), lambda i: pl.sum(E[i, r], axis=r), name="S")
    return pl.compute((n, m), lambda i, j: E[i, j] / S[i], name="P")


def _guarded_shift():
    """A read guarded by where(): the guard keeps it inside A (cache_read and vectorize must
    keep it there too)."""
    n, m = pl.var("n"), pl.var("m")
    A = pl.placeholder((n, m), "float32", name="A")
    P = pl.compute((n + 1, m), lambda i, j: pl.where(i >= 1, A[i - 1, j], 0.0), name="P")
    return pl.compute((n, m), lambda i, j: P[i, j] + P[i + 1, j] * 3.0, name="Q")


@pl.script
def _stencil(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(1, n):  # noqa: F821 - n is the size parameter of A's shape
        for j in range(1, n):  # noqa: F821
            A[i, j] = A[i - 1, j] + A[i, j - 1] * 0.5


@pl.script
def _seidel(A: pl.Buffer[("n",), "float64"], steps: pl.Buffer[("T",), "float64"]):
    for t in range(T):  # noqa: F821 - T is the size parameter of steps' shape
        for i in range(1, n - 1):  # noqa: F821
            A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0


@pl.script
def _triangular(A: pl.Buffer[("n", "n"), "float32"], x: pl.Buffer[("n",), "float32"],
                y: pl.Buffer[("n",), "float32"]):
    for i in range(n):  # noqa: F821
        for j in range(i + 1):
            if j == 0:
                y[i] = 0
            y[i] = y[i] + A[i, j] * x[j]


def _gather():
    return pl.make_kernel("{ [i, j] : 0 <= i < n and 0 <= j < m }",
                          "out[i, j] = a[idx[i], j] * 2 + a[i, j]",
                          args=[pl.ArrayArg("out", "float32", shape=("n", "m")),
                                pl.ArrayArg("idx", "int32", shape=("n",)),
                                pl.ArrayArg("a", "float32", shape=("n", "m"))])


def _lower_triangle():
    return pl.make_kernel("{ [i, j] : 0 <= j <= i < n }", "out[i, j] = a[i, j] + 2 * a[j, i]",
                          args=[pl.ArrayArg("out", "float32", shape=("n", "n")),
                                pl.ArrayArg("a", "float32", shape=("n", "n"))])


@dataclass(frozen=True)
class FuzzProgram:
    """A program, how to make a fresh schedule of it, and its size parameters."""
    name: str
    make: Callable[[], object]
    sizes: tuple[str, ...]

    def schedule(self) -> pl.Schedule:
        from polyloop.schedule.kernel import schedule_of
        obj = self.make()
        return schedule_of(obj) if isinstance(obj, pl.LoopKernel) else pl.Schedule(obj)


PROGRAMS = {p.name: p for p in (
    FuzzProgram("chain", _chain, ("n", "m")),
    FuzzProgram("matmul_relu", _matmul_relu, ("n",)),
    FuzzProgram("row_softmax", _row_softmax, ("n", "m")),
    FuzzProgram("guarded_shift", _guarded_shift, ("n", "m")),
    FuzzProgram("stencil", lambda: _stencil, ("n",)),
    FuzzProgram("seidel", lambda: _seidel, ("T", "n")),
    FuzzProgram("triangular", lambda: _triangular, ("n",)),
    FuzzProgram("gather", _gather, ("n", "m")),
    FuzzProgram("lower_triangle", _lower_triangle, ("n",)),
)}


# random steps --------------------------------------------------------------------------------

PRIMITIVES = ("split", "reorder", "tile", "fuse", "skew", "reverse", "parallel", "vectorize",
              "unroll", "compute_at", "reverse_compute_at", "decompose_reduction",
              "compute_inline", "reverse_compute_inline", "cache_read", "cache_write", "rfactor")
GPU_PRIMITIVES = PRIMITIVES + ("bind", "bind")   # for the OpenCL target


def plan_step(sch: pl.Schedule, primitive: str, choice: int) -> Callable[[], object] | None:
    """``primitive`` with arguments drawn from ``choice`` (a seed), as a call to make; None when
    the schedule offers no valid arguments. Handles are looked up here (``get_loops`` is
    recorded in the trace), so that the call itself is the only step that can be refused."""
    r = random.Random(choice)
    blocks = sch.blocks()
    block = r.choice(blocks)
    loops = sch.get_loops(block)
    if not loops:
        return None
    loop = r.choice(loops)
    a, b = sorted(r.sample(range(len(loops)), 2)) if len(loops) > 1 else (0, 0)
    other = r.choice(sch.get_loops(r.choice(blocks)) or loops)
    # a middle factor of 1 makes a loop of one iteration, which isl's AST drops
    factors = r.choice([[None, r.choice([2, 3, 4, 8, 16])], [r.choice([2, 3]), None],
                        [None, 1, r.choice([2, 4, 8])]])
    reads = sorted(_read_buffers(sch, block))
    calls: dict[str, Callable[[], object] | None] = {
        "split": lambda: sch.split(loop, factors=factors),
        "reorder": (lambda: sch.reorder(loops[b], loops[a])) if a != b else None,
        "tile": (lambda: sch.tile(loops[a], loops[b], r.choice([2, 3, 8]), r.choice([2, 4, 5])))
        if a != b else None,
        "fuse": (lambda: sch.fuse(loops[a], loops[a + 1])) if a + 1 < len(loops) else None,
        "skew": (lambda: sch.skew(loops[a], loops[b], r.choice([1, -1, 2]))) if a != b else None,
        "reverse": lambda: sch.reverse(loop),
        "parallel": lambda: sch.parallel(loop),
        "vectorize": lambda: sch.vectorize(r.choice([loops[-1], loop])),
        "unroll": lambda: sch.unroll(loop, r.choice([None, 2, 4])),
        "compute_at": lambda: sch.compute_at(block, other),
        "reverse_compute_at": lambda: sch.reverse_compute_at(block, other),
        "decompose_reduction": lambda: sch.decompose_reduction(block, loop),
        "compute_inline": lambda: sch.compute_inline(block),
        "reverse_compute_inline": lambda: sch.reverse_compute_inline(block),
        "cache_read": (lambda: sch.cache_read(block, r.choice(reads), r.choice(["global", "local"])))
        if reads else None,
        "cache_write": lambda: sch.cache_write(block, r.choice(["global", "local"])),
        "rfactor": lambda: sch.rfactor(loop),
        "bind": lambda: sch.bind(loop, r.choice(["blockIdx.x", "threadIdx.x", "blockIdx.y"])),
    }
    return calls[primitive]


def _read_buffers(sch: pl.Schedule, block) -> set[str]:
    from polyloop.ir.expr import loads
    name = block if isinstance(block, str) else block.name
    stmts = [s for s in sch.program.statements if s.block_name == name]
    return {ld.buffer for s in stmts for ld in loads(s.value)}


def assert_total_expressions(sch: pl.Schedule) -> None:
    """Every loop expression of the schedule is a function of its statement's iterators
    everywhere, not only on the statement's domain (the AST build of a GPU launch relaxes
    domains; a band undefined on part of one is refused by isl)."""
    import islpy as isl
    from polyloop.poly.isl_util import map_in
    from polyloop.poly.tree import loops
    params = sch.program.params
    for node in loops(sch.state.root):
        for stmt, text in node.exprs:
            known = map_in(params, text).domain()
            missing = isl.Set.universe(known.get_space()).subtract(known)
            assert missing.is_empty(), (f"loop '{node.name}' of '{stmt}' is undefined on "
                                        f"{missing}: {text}; trace {sch.trace.to_json()}")


# inputs and comparison ----------------------------------------------------------------------

def random_arguments(program, sizes: dict[str, int], rng: np.random.Generator) -> dict:
    """Fresh inputs for ``program`` at ``sizes``; outputs poisoned (NaN, or a sentinel)."""
    from polyloop.ir.shapes import evaluate
    arrays = {}
    for b in program.arg_buffers():
        shape = tuple(evaluate(d, sizes) for d in b.shape)
        if b.role is pl.BufferRole.OUTPUT:
            arrays[b.name] = np.full(shape, np.nan if b.dtype.is_float else -77,
                                     b.dtype.numpy)
        elif b.dtype.is_int:    # index arrays: valid indices of the first dimension
            arrays[b.name] = rng.integers(0, max(shape[0], 1), size=shape).astype(b.dtype.numpy)
        else:
            arrays[b.name] = rng.uniform(-1, 1, shape).astype(b.dtype.numpy)
    return arrays


def run_both(sch: pl.Schedule, mod, sizes: dict[str, int], seed: int) -> None:
    """Run ``mod`` and the reference interpreter on the same fresh arguments and compare every
    argument afterwards (outputs were poisoned: an unwritten element shows)."""
    from polyloop.testing import interpret
    program = sch.original
    args = random_arguments(program, sizes, np.random.default_rng(seed))
    ref = {k: v.copy() for k, v in args.items()}
    got = {k: v.copy() for k, v in args.items()}
    interpret(program, **ref, **sizes)
    mod(**got, **sizes)
    for name in args:
        np.testing.assert_allclose(got[name], ref[name], rtol=2e-4, atol=2e-4,
                                   err_msg=f"{program.name}: argument {name}, sizes {sizes}, "
                                           f"trace {sch.trace.to_json()}")
