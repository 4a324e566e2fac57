# SPDX-License-Identifier: Apache-2.0
"""``compute_at`` puts each producer instance in the first consumer iteration that needs it,
``reverse_compute_at`` each consumer instance in the last producer iteration it needs; both
from exact footprints (a convolution's halo), both re-checked against every dependence."""
from __future__ import annotations

import numpy as np

import polyloop as pl

from .programs import (check_conv, check_matmul_relu, conv2d, indent_of, lines, matmul_sch,
                       raises_schedule_error, refused_unchanged, reversed_copy)


def test_compute_at_the_matmul_into_the_relu_loop(rng):
    sch, _ = matmul_sch()
    di, dj = sch.get_loops("D")
    sch.compute_at(sch.get_block("C"), dj)
    assert lines(sch) == [
        "for i in range(n):",
        "for j in range(n):",
        "C[i, j] = 0.0",
        "for k in range(n):",
        "C[i, j] += A[i, k] * B[k, j]",
        "D[i, j] = max(C[i, j], 0.0)",
    ]
    check_matmul_relu(sch, rng)


def test_compute_at_an_outer_loop_keeps_inner_nests_separate(rng):
    sch, _ = matmul_sch()
    di, _ = sch.get_loops("D")
    sch.compute_at("C", di)
    text = lines(sch)
    assert text[0] == "for i in range(n):" and text.count("for i in range(n):") == 1
    assert indent_of(sch, "C[i, j] = 0.0") == indent_of(sch, "D[i, j] = max") == 8
    check_matmul_relu(sch, rng)


def _conv_tiled(shape):
    O = conv2d(*shape)
    sch = pl.Schedule(O)
    b, o, y, x, rc, rh, rw = sch.get_loops("O")
    y0, x0, y1, x1 = sch.tile(y, x, 4, 4)
    sch.reorder(b, y0, x0, o)
    return sch, (b, y0, x0, o)


def test_compute_at_a_padded_input_into_a_conv_output_tile(rng):
    shape = (2, 3, 4, 11, 10)        # batch, cin, cout, h, w: 4x4 tiles do not divide
    sch, (b, y0, x0, o) = _conv_tiled(shape)
    sch.compute_at("P", x0)
    text = str(sch)
    # the padding stage now runs per tile, over the tile's halo: rows 4*y0+2 .. 4*y0+5 plus the
    # first tile's leading rows (each element once, in the first tile that reads it)
    assert "for y in range(max(6, 4 * y_0 + 2), min(13, 4 * y_0 + 6)):" in text
    assert indent_of(sch, "P[b, c, y, x] = where(") > indent_of(sch, "for x_0 in range(3):")
    assert indent_of(sch, "for c in range(3):") == 12      # inside b, y_0, x_0
    check_conv(sch, rng, shape)
    sch.parallel(b)       # tiles of different images share nothing
    check_conv(sch, rng, shape)


def test_compute_at_refused_when_a_parallel_loop_would_carry_the_halo():
    sch, (b, y0, x0, o) = _conv_tiled((1, 2, 2, 9, 9))
    sch.parallel(y0)
    refused_unchanged(sch, lambda: sch.compute_at("P", x0),
                      "compute_at(P, x_0) would make parallel loop 'y_0' carry",
                      "RAW dependence P -> O on buffer P", "re:O\\(b=0, o=\\d+, y=\\d+",
                      "written by P(", "compute_at of 'P' is legal at loop 'b'.")


def test_compute_at_parallel_after_is_refused_too():
    sch, (b, y0, x0, o) = _conv_tiled((1, 2, 2, 9, 9))
    sch.compute_at("P", x0)
    refused_unchanged(sch, lambda: sch.parallel(y0), "cannot parallelize loop 'y_0'",
                      "RAW dependence P -> O on buffer P")


def test_compute_at_refused_when_the_producer_would_read_overwritten_input():
    sch = pl.Schedule(reversed_copy())
    (loop,) = sch.get_loops("R")
    refused_unchanged(sch, lambda: sch.compute_at("P", loop),
                      "compute_at(P, i) would break the WAR dependence P -> R on buffer A",
                      "re:R\\(i=(\\d+)\\) overwrites A\\[\\d+\\] read by P\\(i=\\d+\\)",
                      "compute_at of 'P' is legal at no loop around 'i'")


def test_reverse_compute_at_refused_on_the_same_hazard():
    sch = pl.Schedule(reversed_copy())
    (loop,) = sch.get_loops("P")
    refused_unchanged(sch, lambda: sch.reverse_compute_at("R", loop),
                      "reverse_compute_at(R, i) would break the WAR dependence P -> R on buffer A",
                      "reverse_compute_at of 'R' is legal at no loop around 'i'")


def test_reversed_copy_default_schedule_is_correct(rng):
    a = rng.standard_normal(17)
    mod = pl.build(pl.Schedule(reversed_copy()))
    expected = (a * 2.0)[::-1].copy()
    mod(a)
    np.testing.assert_array_equal(a, expected)


def test_compute_at_wrong_uses():
    sch, (i, j, k) = matmul_sch()
    di, dj = sch.get_loops("D")
    refused_unchanged(sch, lambda: sch.compute_at("D", i), "compute_at",
                      "block 'D' writes 'D', an argument of the program")
    refused_unchanged(sch, lambda: sch.compute_at("C", i), "compute_at",
                      "block 'C' is already inside loop 'i'")
    refused_unchanged(sch, lambda: sch.compute_at("E", di), "no block named 'E'", "C, D")
    refused_unchanged(sch, lambda: sch.compute_at("C", "di"), "expected a loop")


def test_compute_at_refused_when_a_consumer_is_outside_the_loop():
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    T = pl.compute((n,), lambda i: A[i] + 1.0, name="T")
    U = pl.compute((n,), lambda i: T[i] * 2.0, name="U")
    V = pl.compute((n,), lambda i: T[i] + U[i], name="V")
    sch = pl.Schedule(V)
    (u,) = sch.get_loops("U")
    refused_unchanged(sch, lambda: sch.compute_at("T", u), "compute_at",
                      "'T' (written by block 'T') is also read by V outside loop 'i'")


# reverse_compute_at -----------------------------------------------------------------------

def test_reverse_compute_at_into_the_split_matmul(rng):
    sch, (i, j, k) = matmul_sch()
    j0, j1 = sch.split(j, factors=[None, 8])
    sch.reorder(i, j0, k, j1)
    sch.reverse_compute_at(sch.get_block("D"), j0)
    text = lines(sch)
    assert text[-2:] == ["for j in range(8 * j_0, min(n, 8 * j_0 + 8)):",
                         "D[i, j] = max(C[i, j], 0.0)"]
    assert indent_of(sch, "D[i, j] = max") == indent_of(sch, "C[i, 8 * j_0 + j_1] +=") - 4
    check_matmul_relu(sch, rng)


def test_reverse_compute_at_waits_for_the_last_reduction_step(rng):
    """With k outermost, each D[i, j] may run only in the last k iteration."""
    sch, (i, j, k) = matmul_sch()
    sch.reorder(k, i, j)
    sch.reverse_compute_at("D", i)
    assert "if k + 1 == n:" in lines(sch)
    check_matmul_relu(sch, rng)


def test_reverse_compute_at_wrong_uses():
    sch, (i, j, k) = matmul_sch()
    di, dj = sch.get_loops("D")
    sch.reverse_compute_at("D", j)
    refused_unchanged(sch, lambda: sch.reverse_compute_at("D", i), "reverse_compute_at",
                      "block 'D' is already inside loop 'i'")
    n = pl.var("n")
    A = pl.placeholder((n,), "float32", name="A")
    T = pl.compute((n,), lambda i: A[i] + 1.0, name="T")
    U = pl.compute((n,), lambda i: A[i] * 2.0, name="U")
    W = pl.compute((n,), lambda i: T[i] + U[i], name="W")
    sch2 = pl.Schedule(W)
    (t,) = sch2.get_loops("T")
    refused_unchanged(sch2, lambda: sch2.reverse_compute_at("U", t), "reverse_compute_at",
                      "block 'U' reads nothing produced under loop 'i'")


def test_neighbours_follow_the_moved_blocks():
    sch, _ = matmul_sch()
    assert sch.get_consumers("C") == [pl.BlockHandle("D")]
    raises_schedule_error(lambda: sch.get_consumers("X"), "no block named 'X'")
