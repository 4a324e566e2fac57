# SPDX-License-Identifier: Apache-2.0
"""``pl.dependences``: exact RAW/WAR/WAW dependences with source, sink, buffer, relation and
constant distance vectors, checked on programs whose dependences are known by hand."""
from __future__ import annotations

import islpy as isl
import pytest

import polyloop as pl
from polyloop.ir.dtypes import DType
from polyloop.ir.expr import Var
from polyloop.ir.program import Buffer, BufferRole, Program, Statement, param
from polyloop.poly.deps import DepKind

RAW, WAR, WAW = DepKind.RAW, DepKind.WAR, DepKind.WAW


def gauss_seidel() -> Program:
    """One in-place sweep of a 5-point stencil over the interior of A (n x n)::

        for i in 1..n-2: for j in 1..n-2:
            A[i, j] = 0.2 * (A[i-1, j] + A[i, j-1] + A[i, j] + A[i+1, j] + A[i, j+1])

    A[i-1, j] and A[i, j-1] are already updated (flow, distances (1, 0) and (0, 1));
    A[i+1, j] and A[i, j+1] are still old and overwritten later (anti, the same distances).
    """
    n = param("n")
    A = Buffer("A", (n, n), DType.FLOAT64, BufferRole.INOUT)
    i, j = Var("i"), Var("j")
    value = (A[i - 1, j] + A[i, j - 1] + A[i, j] + A[i + 1, j] + A[i, j + 1]) * 0.2
    S = Statement("S", ("i", "j"), "[n] -> { S[i, j] : 1 <= i < n - 1 and 1 <= j < n - 1 }",
                  "A", (i, j), value)
    return Program("gauss_seidel", (A,), (S,), ("n",), ("A",))


def seidel_1d() -> Program:
    """T in-place sweeps of a 3-point stencil: ``A[i] = (A[i-1] + A[i] + A[i+1]) / 3``."""
    n = param("n")
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INOUT)
    i = Var("i")
    S = Statement("S", ("t", "i"), "[T, n] -> { S[t, i] : 0 <= t < T and 1 <= i < n - 1 }",
                  "A", (i,), (A[i - 1] + A[i] + A[i + 1]) / 3.0)
    return Program("seidel_1d", (A,), (S,), ("T", "n"), ("A",))


def relation(text: str) -> isl.Map:
    return isl.Map(text)


def summary(deps) -> set[tuple]:
    return {(d.kind, d.source, d.sink, d.buffer, d.distance, d.reduction) for d in deps}


def test_in_place_stencil_has_flow_and_anti_dependences_with_constant_distances():
    deps = pl.dependences(gauss_seidel())
    assert summary(deps) == {
        (RAW, "S", "S", "A", (0, 1), False), (RAW, "S", "S", "A", (1, 0), False),
        (WAR, "S", "S", "A", (0, 1), False), (WAR, "S", "S", "A", (1, 0), False),
    }
    assert not [d for d in deps if d.kind is WAW]     # every element is written once
    flow_j = next(d for d in deps if d.kind is RAW and d.distance == (0, 1))
    expected = relation("[n] -> { S[i, j] -> S[i, j + 1] : 1 <= i < n - 1 and 1 <= j < n - 2 }")
    assert flow_j.relation.is_equal(expected)
    assert "RAW S -> S on A distance (0, 1)" in str(deps)


def test_repeated_sweeps_depend_across_time():
    deps = pl.dependences(seidel_1d())
    kinds = {d.kind for d in deps}
    assert kinds == {RAW, WAR, WAW}
    assert all((d.source, d.sink, d.buffer) == ("S", "S", "A") for d in deps)
    flows = isl.Map("[T, n] -> { S[t, i] -> S[t2, i2] : false }")
    for d in deps:
        if d.kind is RAW:
            flows = flows.union(d.relation)
    # A[i-1] written earlier in the same sweep, A[i] and A[i+1] in the previous one
    for pair in ("S[t, i] -> S[t, i + 1]", "S[t, i] -> S[t + 1, i]", "S[t, i] -> S[t + 1, i - 1]"):
        known = relation(f"[T, n] -> {{ {pair} : 0 <= t < T - 1 and 2 <= i < n - 2 }}")
        assert known.is_subset(flows), pair
    # and nothing runs backwards in time
    forward = isl.Set("[T, n] -> { S[dt, di] : dt > 0 or (dt = 0 and di > 0) }")
    assert flows.deltas().is_subset(forward)


def test_producer_consumer_dependences_name_both_statements():
    n = pl.var("n")
    A = pl.placeholder((n + 1,), "float32", name="A")
    B = pl.compute((n + 1,), lambda i: A[i] * 2.0, name="B")
    C = pl.compute((n,), lambda i: B[i] + B[i + 1], name="C")
    deps = pl.dependences(C)
    assert {(d.kind, d.source, d.sink, d.buffer) for d in deps} == {(RAW, "B", "C", "B")}
    both = deps[0].relation
    for d in deps[1:]:
        both = both.union(d.relation)
    assert both.is_equal(relation("[n] -> { B[i] -> C[c] : 0 <= c < n and (c = i or c = i - 1) }"))
    assert all(d.distance is None for d in deps)  # between different statements


def test_reduction_dependences_are_marked():
    n = pl.var("n")
    A = pl.placeholder((n, n), "float32", name="A")
    B = pl.placeholder((n, n), "float32", name="B")
    k = pl.reduce_axis((0, n), name="k")
    C = pl.compute((n, n), lambda i, j: pl.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = pl.compute((n, n), lambda i, j: pl.maximum(C[i, j], 0.0), name="D")
    deps = pl.dependences(D)
    triples = {(d.kind, d.source, d.sink, d.reduction) for d in deps}
    assert (RAW, "C_init", "C", False) in triples and (WAW, "C_init", "C", False) in triples
    assert {(kind, True) for kind, s, t, red in triples if (s, t) == ("C", "C")} == \
        {(RAW, True), (WAR, True), (WAW, True)}
    assert (RAW, "C", "D", False) in triples
    assert all(d.buffer == "C" for d in deps)    # A and B are only read
    assert "(reduction)" in str(deps)


def test_elementwise_programs_have_no_dependences():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    B = pl.compute((n,), lambda i: A[i] + 1.0, name="B")
    assert len(pl.dependences(B)) == 0
    assert str(pl.dependences(B)) == "no dependences"


def test_a_schedule_reports_its_programs_dependences():
    n = pl.var("n")
    A = pl.placeholder((n + 1,), "float64", name="A")
    B = pl.compute((n + 1,), lambda i: A[i] * 2.0, name="B")
    C = pl.compute((n,), lambda i: B[i] + B[i + 1], name="C")
    from_schedule = pl.dependences(pl.Schedule(C))
    from_tensors = pl.dependences(C)
    assert summary(from_schedule) == summary(from_tensors)


@pytest.mark.parametrize("obj", ["text", 3, None])
def test_dependences_of_something_else_is_an_error(obj):
    with pytest.raises((TypeError, pl.PolyloopError)):
        pl.dependences(obj)


def test_dataflow_keeps_the_direct_dependences_of_a_time_iterated_stencil():
    """In place over time: a read sees the last write of its element, so dataflow distances are
    constant, while memory-based dependences reach every later time step."""
    from polyloop.ir.dtypes import DType
    from polyloop.ir.expr import Var, VarKind
    from polyloop.ir.program import Buffer, BufferRole, Program, Statement
    n, T = Var("n", VarKind.PARAM), Var("T", VarKind.PARAM)
    A = Buffer("A", (n,), DType.FLOAT64, BufferRole.INOUT)
    t, i = Var("t"), Var("i")
    S = Statement("S", ("t", "i"), "[n, T] -> { S[t, i] : 0 <= t < T and 1 <= i < n - 1 }", "A",
                  (i,), A[i - 1] + A[i + 1])
    prog = Program("sweep", (A,), (S,), ("n", "T"), ("A",))
    flow = pl.dependences(prog)
    got = {(d.kind.value, d.distance) for d in flow}
    assert got == {("RAW", (0, 1)), ("RAW", (1, -1)), ("WAR", (0, 1)), ("WAR", (1, -1)),
                   ("WAW", (1, 0))}
    memory = pl.dependences(prog, kind="memory")
    assert any(d.kind.value == "WAW" and d.distance is None for d in memory)
    with pytest.raises(pl.PolyloopError, match="kind"):
        pl.dependences(prog, kind="value")
