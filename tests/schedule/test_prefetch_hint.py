# SPDX-License-Identifier: Apache-2.0
"""``sch.prefetch(block, buffer, loop, distance)``: a software prefetch hint. It never changes a
result (NumPy at awkward and symbolic sizes, poisoned outputs), the C code holds one
``__builtin_prefetch`` per cache line of the region ahead and none past the iteration domain,
OpenCL spells it ``prefetch(p, n)``, wrong arguments are refused, and the trace replays it."""
from __future__ import annotations

import numpy as np
import pytest

import polyloop as pl
from polyloop.codegen.opencl import generate_opencl
from polyloop.lower.launches import lower_device
from polyloop.runtime.opencl import platform_available


def scale():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    return pl.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")


def matmul(m=None, n=None, k=None, dtype="float32"):
    m, n, k = m or pl.var("m"), n or pl.var("n"), k or pl.var("k")
    A = pl.placeholder((m, k), dtype, name="A")
    B = pl.placeholder((k, n), dtype, name="B")
    r = pl.reduce_axis((0, k), name="r")
    return pl.compute((m, n), lambda i, j: pl.sum(A[i, r] * B[r, j], axis=r), name="C")


def scaled_rows(distance: int, tile: int = 16) -> pl.Schedule:
    sch = pl.Schedule(scale())
    i, j = sch.get_loops("B")
    j0, _ = sch.split(j, factors=[None, tile])
    sch.prefetch("B", "A", j0, distance=distance)
    return sch


def tiled_matmul(distance: int, **sizes) -> pl.Schedule:
    """i, j0, r, j1 with B's next rows prefetched at r and C's next tile (for writing) at j0."""
    sch = pl.Schedule(matmul(**sizes))
    i, j, r = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, r, j1)
    sch.prefetch("C", "B", r, distance=distance, locality=2)
    sch.prefetch("C", "C", j0, distance, write=True)
    return sch


def poisoned(shape, dtype="float32"):
    return np.full(shape, np.nan, dtype)


def run_square(mod, rng, n):
    """``mod(a, out)`` on a fresh n x n input and an output poisoned with NaN; (a, out)."""
    a = rng.standard_normal((n, n), dtype="float32")
    out = poisoned((n, n))
    mod(a, out)
    return a, out


# -- results ------------------------------------------------------------------------------------

@pytest.mark.parametrize("distance", [1, 3, 100])
@pytest.mark.parametrize("n", [1, 15, 17, 40])
def test_rows_prefetched_ahead_give_numpy_results(rng, distance, n):
    a, out = run_square(pl.build(scaled_rows(distance)), rng, n)
    np.testing.assert_array_equal(out, a * 2)


@pytest.mark.parametrize("distance", [1, 3, 40])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (5, 15, 17), (9, 33, 31)])
def test_matmul_with_read_and_write_prefetches_matches_numpy(rng, distance, m, n, k):
    mod = pl.build(tiled_matmul(distance))
    a = rng.standard_normal((m, k), dtype="float32")
    b = rng.standard_normal((k, n), dtype="float32")
    out = poisoned((m, n))
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_constant_sizes_and_a_distance_past_the_trip_count_emit_nothing(rng):
    # 3 tiles of 16 along j: 3 tiles ahead is never inside the domain
    sch = pl.Schedule(matmul(7, 48, 5, "float64"))
    i, j, r = sch.get_loops("C")
    j0, _ = sch.split(j, factors=[None, 16])
    sch.prefetch("C", "B", j0, distance=3)
    mod = pl.build(sch)
    assert "__builtin_prefetch" not in mod.source
    assert "// prefetch: B for C, 3 iterations ahead, read, locality 3" in mod.source
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 48))
    out = poisoned((7, 48), "float64")
    mod(a, b, out)
    np.testing.assert_allclose(out, a @ b)


def test_parallel_outer_loop_and_two_dimensional_region(rng):
    """A 4x16 tile ahead is a loop over its rows, one or two lines a row."""
    sch = pl.Schedule(scale())
    i, j = sch.get_loops("B")
    i0, j0, i1, j1 = sch.tile(i, j, 4, 16)
    sch.parallel(i0)
    sch.prefetch("B", "A", j0)
    mod = pl.build(sch)
    assert "for (int64_t pf_r0 = " in mod.source
    for n in (3, 21):
        a, out = run_square(mod, rng, n)
        np.testing.assert_array_equal(out, a * 2)


# -- generated code -----------------------------------------------------------------------------

def test_c_source_has_one_prefetch_per_cache_line_of_the_row_ahead():
    src = pl.build(tiled_matmul(1)).source
    body = src[src.index("int32_t"):]
    # B[r + 1][16*j0 : 16*j0 + 16]: 64 bytes, two lines when unaligned; clipped at the end
    assert "// prefetch: B for C, 1 iteration ahead, read, locality 2" in body
    assert "if (r + 1 < k" in body or "if (k >= r + 2" in body
    assert "__builtin_prefetch(&B[r + 1][16 * j_0 + prefetch_at], 0, 2);" in body
    # C's next tile, for writing, with locality 3
    assert "// prefetch: C for C, 1 iteration ahead, write, locality 3" in body
    assert ", 1, 3);" in body


def test_constant_row_is_unrolled_into_lines_and_a_one_element_region_is_one_call():
    sch = pl.Schedule(matmul(8, 64, 8))
    i, j, r = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 32])
    sch.reorder(i, j0, r, j1)
    sch.prefetch("C", "B", r)
    sch.prefetch("C", "A", r, distance=2)
    src = pl.build(sch).source
    # B[r + 1][32*j0 .. +31]: 128 bytes -> elements 0, 16 and the last one
    for off in ("32 * j_0]", "32 * j_0 + 16]", "32 * j_0 + 31]"):
        assert f"__builtin_prefetch(&B[r + 1][{off}, 0, 3);" in src
    assert "__builtin_prefetch(&A[i][r + 2], 0, 3);" in src


def test_show_prints_the_hint_and_split_afterwards_drops_it():
    sch = scaled_rows(2)
    assert "# prefetch=A for B, 2 iterations ahead, read, locality 3" in sch.show()
    i, j0, _ = sch.get_loops("B")
    sch.reorder(j0, i)        # the loop node stays: so does the hint
    assert "# prefetch=A for B" in sch.show()
    sch.split(j0, factors=[None, 2])   # a new loop node: the hint is gone, as annotations are
    assert "prefetch" not in sch.show()


def test_a_second_hint_for_the_same_buffer_replaces_the_first():
    sch = scaled_rows(2)
    j0 = sch.get_loops("B")[1]
    sch.prefetch("B", "A", j0, distance=1, locality=0)
    assert sch.show().count("# prefetch=") == 1
    assert "1 iteration ahead, read, locality 0" in sch.show()


def test_trace_replays_the_hint(rng):
    sch = tiled_matmul(2)
    assert "sch.prefetch(" in str(sch.trace)
    again = pl.Schedule.from_trace(matmul(), sch.trace.to_json())
    assert again.show() == sch.show()
    assert pl.build(again).source == pl.build(sch).source


def test_opencl_source_uses_prefetch_of_global_memory(rng):
    sch = pl.Schedule(scale())
    i, j = sch.get_loops("B")
    j0, _ = sch.split(j, factors=[None, 16])
    sch.bind(i, "blockIdx.x")
    sch.prefetch("B", "A", j0)
    src = generate_opencl(lower_device(sch.program, sch.state.root))
    assert "prefetch(&A[i * n + (16 * j_0 + 16)], " in src
    ok, _ = platform_available()
    if ok:
        mod = pl.build(sch, target="opencl")
        a = rng.standard_normal((19, 19), dtype="float32")
        np.testing.assert_array_equal(mod(a), a * 2)


# -- refusals -----------------------------------------------------------------------------------

def _loops():
    sch = pl.Schedule(matmul())
    i, j, r = sch.get_loops("C")
    return sch, i, j, r


@pytest.mark.parametrize("call, message", [
    (lambda s, i, j, r: s.prefetch("C", "Z", r), "unknown buffer; the program's buffers are"),
    (lambda s, i, j, r: s.prefetch("Q", "A", r), "Q"),
    (lambda s, i, j, r: s.prefetch("C", "B", r, distance=0), "distance must be an integer >= 1"),
    (lambda s, i, j, r: s.prefetch("C", "B", r, distance=1.5), "distance must be an integer"),
    (lambda s, i, j, r: s.prefetch("C", "B", r, locality=4), "locality must be 0, 1, 2 or 3"),
    (lambda s, i, j, r: s.prefetch("C", "B", r, write="yes"), "write must be True or False"),
    (lambda s, i, j, r: s.prefetch("C", "A", i), "grows with the sizes"),
    (lambda s, i, j, r: s.prefetch("C", 3, r), "expected a buffer name or tensor"),
])
def test_bad_arguments_are_refused_with_the_rule(call, message):
    sch, i, j, r = _loops()
    before = sch.show()
    with pytest.raises(pl.ScheduleError, match=message):
        call(sch, i, j, r)
    assert sch.show() == before and "prefetch" not in str(sch.trace)


def test_loop_not_above_the_block_and_buffer_not_accessed_are_refused():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = pl.compute((n,), lambda i: B[i] * 2.0, name="C")
    sch = pl.Schedule(C)
    (ib,), (ic,) = sch.get_loops("B"), sch.get_loops("C")
    with pytest.raises(pl.ScheduleError, match="the loop is not above block 'C'"):
        sch.prefetch("C", "B", ib)
    with pytest.raises(pl.ScheduleError, match="block 'C' does not access 'A' there"):
        sch.prefetch("C", "A", ic)
    sch.prefetch("C", "B", ic, distance=8)   # a 1-D buffer: one element ahead, guarded
    src = pl.build(sch).source
    assert "__builtin_prefetch(&B[i_1 + 8], 0, 3);" in src or \
        "__builtin_prefetch(&B[i + 8], 0, 3);" in src


def test_vectorized_loop_and_too_many_lines_are_refused():
    sch = pl.Schedule(matmul(256, 256, 256))
    i, j, r = sch.get_loops("C")
    j0, j1 = sch.split(j, factors=[None, 16])
    sch.reorder(i, j0, r, j1)
    sch.vectorize(j1)
    with pytest.raises(pl.ScheduleError, match="the loop is vectorized"):
        sch.prefetch("C", "B", j1)
    # one iteration of j0 reads B[:, 16 j0 : 16 j0 + 16]: 256 rows, 512 lines
    with pytest.raises(pl.ScheduleError, match="spans up to 512 lines, more than 64"):
        sch.prefetch("C", "B", j0)


# -- the region is exact: a walk of the lowered loops --------------------------------------------

def _value(e, env):
    """An index expression's value (a tiny evaluator of the loop AST's integer expressions)."""
    from polyloop.ir.expr import BinOp, BinOpKind as K, Const, Select, Unary, Var
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Unary):
        return -_value(e.operand, env)
    if isinstance(e, Select):
        return _value(e.true_value if _value(e.cond, env) else e.false_value, env)
    assert isinstance(e, BinOp), e
    a, b = _value(e.lhs, env), _value(e.rhs, env)
    ops = {K.ADD: a + b, K.SUB: a - b, K.MUL: a * b, K.LT: a < b, K.LE: a <= b, K.GT: a > b,
           K.GE: a >= b, K.EQ: a == b, K.NE: a != b, K.AND: a and b, K.OR: a or b,
           K.MIN: min(a, b), K.MAX: max(a, b)}
    if e.op in (K.FLOORDIV, K.MOD):
        return a // b if e.op is K.FLOORDIV else a % b
    return ops[e.op]


def _walk_regions(sch, sizes, buffer):
    """(prefetched, touched): per (outer loop values, hinted loop value), the elements of
    ``buffer`` the prefetches at the top of that iteration name, and those the stores touch."""
    from polyloop.ir.expr import Load, loads
    from polyloop.ir.loop_notes import PrefetchHint
    from polyloop.ir.loops import Block, For, If, Prefetch, Store
    from polyloop.lower.lower import lower
    kernel = lower(sch.program, sch.state.root)
    prefetched, touched = {}, {}

    def go(n, env, here):
        if isinstance(n, Block):
            for c in n.body:
                go(c, env, here)
        elif isinstance(n, If):
            if _value(n.cond, env):
                go(n.then, env, here)
            elif n.otherwise is not None:
                go(n.otherwise, env, here)
        elif isinstance(n, For):
            hinted = any(k == "prefetch" and isinstance(v, PrefetchHint) and v.buffer == buffer
                         for k, v in n.annotations)
            key = tuple(sorted(env.items()))
            for v in range(_value(n.start, env), _value(n.stop, env), n.step):
                go(n.body, env | {n.var: v}, (key, v) if hinted else here)
        elif isinstance(n, Prefetch) and n.buffer == buffer:
            assert here is not None
            idx = [_value(i, env) for i in n.indices]
            count = _value(n.count, env)
            assert count >= 1
            got = prefetched.setdefault(here, set())
            got |= {tuple(idx[:-1]) + (idx[-1] + t,) for t in range(count)}
        elif isinstance(n, Store) and here is not None:
            for ld in [Load(n.buffer, n.indices, n.value.dtype)] + loads(n.value):
                if ld.buffer == buffer:
                    touched.setdefault(here, set()).add(
                        tuple(_value(i, env) for i in ld.indices))
    go(kernel.body, dict(sizes), None)
    return prefetched, touched


@pytest.mark.parametrize("make, sizes, buffer, distance", [
    (lambda: scaled_rows(1), {"n": 37}, "A", 1),
    (lambda: scaled_rows(3), {"n": 70}, "A", 3),
    (lambda: tiled_matmul(2), {"m": 3, "n": 21, "k": 5}, "B", 2),
    (lambda: tiled_matmul(1), {"m": 2, "n": 35, "k": 2}, "C", 1),
])
def test_prefetched_elements_are_exactly_those_touched_distance_iterations_later(
        make, sizes, buffer, distance):
    prefetched, touched = _walk_regions(make(), sizes, buffer)
    assert prefetched
    for (key, v), elements in touched.items():   # each iteration was prefetched in time
        if (key, v - distance) in touched:
            assert prefetched.get((key, v - distance)) == elements, (key, v)
    for (key, v), elements in prefetched.items():  # and nothing else, nothing past the end
        assert elements == touched.get((key, v + distance), set()), (key, v)


def test_loads_under_where_never_prefetch_outside_the_buffer(rng):
    """Padding reads A[i - 1] only where 1 <= i <= n: the region is clipped to A's box."""
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    P = pl.compute((n + 2,), lambda i: pl.where((i >= 1) & (i <= n), A[i - 1], 0.0), name="P")
    sch = pl.Schedule(P)
    i0, _ = sch.split(sch.get_loops("P")[0], factors=[None, 4])
    sch.prefetch("P", "A", i0, distance=1)
    for size in (1, 5, 18):
        prefetched, _ = _walk_regions(sch, {"n": size}, "A")
        everything = set().union(*prefetched.values()) if prefetched else set()
        assert everything <= {(x,) for x in range(size)}
        assert size < 4 or everything
    mod = pl.build(sch)
    a = rng.standard_normal(11, dtype="float32")
    out = poisoned(13)
    mod(a, out)
    np.testing.assert_array_equal(out, np.concatenate([[0], a, [0]]).astype("float32"))


# -- along an enclosing loop: another block's accesses, some iterations of that loop later -------

def row_max_shift():
    """M[i] = max_k A[i, k]; C[i, j] = A[i, j] - M[i]."""
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    k = pl.reduce_axis((0, n), name="k")
    M = pl.compute((n,), lambda i: pl.max(A[i, k], axis=k), name="M")
    return pl.compute((n, n), lambda i, j: A[i, j] - M[i], name="C")


def row_max_then_shift(split_k=True):
    """M computed in C's row i (its own loop over the row, split by 16 with ``split_k``), C's
    columns split by 16."""
    sch = pl.Schedule(row_max_shift())
    i, j = sch.get_loops("C")
    sch.compute_at("M", i)
    if split_k:
        sch.split(sch.get_loops("M")[-1], factors=[None, 16])
    j0, j1 = sch.split(j, factors=[None, 16])
    return sch, i, j0, j1


def along_rows(distance: int) -> pl.Schedule:
    sch, i, j0, _ = row_max_then_shift()
    sch.prefetch("M", "A", j0, distance, along=i, locality=2)
    return sch


@pytest.mark.parametrize("distance", [1, 3])
@pytest.mark.parametrize("n", [1, 15, 17, 40])
def test_prefetch_along_the_row_loop_gives_numpy_results(rng, distance, n):
    a, out = run_square(pl.build(along_rows(distance)), rng, n)
    np.testing.assert_array_equal(out, a - a.max(axis=1, keepdims=True))


@pytest.mark.parametrize("n, distance", [(1, 1), (15, 1), (17, 2), (33, 1), (40, 3)])
def test_along_prefetches_exactly_the_other_blocks_chunk_rows_ahead(n, distance):
    """At (i, j0) of C: the elements M reads at row i + d, chunk k0 = j0; none past the end."""
    prefetched, _ = _walk_regions(along_rows(distance), {"n": n}, "A")
    expected = {}
    for i in range(n - distance):
        for j0 in range(-(-n // 16)):
            expected[i, j0] = {(i + distance, c) for c in range(16 * j0, min(n, 16 * j0 + 16))}
    got = {(dict(key)["i"], v): e for (key, v), e in prefetched.items() if e}
    assert got == expected


def test_along_source_text_show_and_trace_replay():
    sch = along_rows(2)
    assert "# prefetch=A for M, 2 iterations ahead along loop i (#" in sch.show()
    src = pl.build(sch).source
    assert "if (n >= i + 3) {" in src
    assert "__builtin_prefetch(&A[i + 2][16 * j_0 + prefetch_at], 0, 2);" in src
    again = pl.Schedule.from_trace(row_max_shift(), sch.trace.to_json())
    assert again.show() == sch.show()
    assert pl.build(again).source == src


def test_along_loop_moved_inside_keeps_a_comment_and_changes_nothing(rng):
    sch = pl.Schedule(scale())
    i, j = sch.get_loops("B")
    j0, _ = sch.split(j, factors=[None, 16])
    sch.prefetch("B", "A", j0, along=i)
    assert "__builtin_prefetch(&A[i + 1][16 * j_0 + prefetch_at], 0, 3);" in pl.build(sch).source
    sch.reorder(j0, i)      # i is inside j0 now: nothing to look along
    mod = pl.build(sch)
    assert "__builtin_prefetch" not in mod.source
    assert "(not emitted: loop 'i' no longer encloses this loop)" in mod.source
    a = rng.standard_normal((19, 19), dtype="float32")
    out = poisoned((19, 19))
    mod(a, out)
    np.testing.assert_array_equal(out, a * 2)


def test_along_refusals():
    sch, i, j0, j1 = row_max_then_shift(split_k=False)
    before = sch.show()
    with pytest.raises(pl.ScheduleError, match="along loop 'j_1' does not enclose it"):
        sch.prefetch("M", "A", j0, along=j1)
    with pytest.raises(pl.ScheduleError, match="along loop 'j_0' does not enclose it"):
        sch.prefetch("M", "A", j0, along=j0)
    with pytest.raises(pl.ScheduleError, match="fewer than the 2 it should follow"):
        sch.prefetch("M", "A", j1, along=i)
    with pytest.raises(pl.ScheduleError, match="expected a loop"):
        sch.prefetch("M", "A", j0, along="i")
    assert sch.show() == before and "prefetch" not in str(sch.trace)
    sch.prefetch("M", "A", j0, along=i)      # M's one chunk loop k follows j0
