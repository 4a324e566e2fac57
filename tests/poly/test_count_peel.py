# SPDX-License-Identifier: Apache-2.0
"""Counting the instances of a statement whose domain has an independent interval dimension
next to a triangle (syrk's update: k in [0, m) beside j <= i): the interval is peeled off and
multiplied (isl refused the comparison of the peeled set before: spaces did not match)."""
from __future__ import annotations

import pytest

import polyloop as pl
from polyloop.poly.count import statement_instances


@pl.script
def syrk(C: pl.Buffer[("n", "n"), "float64"], A: pl.Buffer[("n", "m"), "float64"]):
    for i in range(n):
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += 1.5 * A[i, k] * A[j, k]


@pytest.mark.parametrize("n, m", [(400, 390), (7, 3)])
def test_triangle_times_interval(n, m):
    expected = sum(i + 1 for i in range(n)) * m
    assert statement_instances(syrk, syrk.statements[0].name, {"n": n, "m": m}) == expected
