# SPDX-License-Identifier: Apache-2.0
"""Pictures of iteration spaces: the PNG is written and shows what it should (counted as drawn
elements, not pixels): one point per instance, one arrow per dependence pair, one colour group
per wavefront or tile."""
from __future__ import annotations

import sys

import pytest

import polyloop as pl

pytest.importorskip("matplotlib")

import polyloop.viz as viz  # noqa: E402


@pl.script
def stencil(A: pl.Buffer[("n", "n"), "float64"]):
    for i in range(1, n):  # noqa: F821
        for j in range(1, n):  # noqa: F821
            A[i, j] = A[i - 1, j] + A[i, j - 1]


@pl.script
def matmul(A: pl.Buffer[("n", "n"), "float32"], B: pl.Buffer[("n", "n"), "float32"],
           C: pl.Buffer[("n", "n"), "float32"]):
    for i in range(n):  # noqa: F821
        for j in range(n):  # noqa: F821
            for k in range(n):  # noqa: F821
                C[i, j] += A[i, k] * B[k, j]


def points_drawn(fig) -> int:
    return sum(len(c.get_offsets()) for c in fig.axes[0].collections)


def arrows_drawn(fig) -> int:
    return sum(1 for t in fig.axes[0].texts if getattr(t, "arrow_patch", None) is not None)


@pytest.mark.parametrize("n", [5, 8])
def test_iteration_space_png(n, tmp_path):
    fig = viz.plot_iteration_space(stencil, params={"n": n})
    assert points_drawn(fig) == (n - 1) ** 2
    # (i, j) -> (i, j + 1) and (i, j) -> (i + 1, j)
    assert arrows_drawn(fig) == 2 * (n - 1) * (n - 2)
    path = tmp_path / "stencil.png"
    fig.savefig(path)
    assert path.stat().st_size > 5000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_dependences_and_as_svg(tmp_path):
    fig = viz.plot_iteration_space(stencil, params={"n": 6}, deps=False)
    assert arrows_drawn(fig) == 0 and points_drawn(fig) == 25
    fig.savefig(tmp_path / "s.svg")
    assert (tmp_path / "s.svg").read_text().lstrip().startswith("<?xml")


def test_wavefronts_of_an_automatic_schedule():
    sch = pl.auto_schedule(stencil, tile=None)
    fig = viz.plot_iteration_space(stencil, params={"n": 8}, schedule=sch)
    assert points_drawn(fig) == 49
    # 13 anti-diagonals i + j = 2 .. 14; each one with more than one point is a green line
    assert len(fig.axes[0].lines) == 11
    assert "13 groups" in fig.axes[0].texts[0].get_text()


def test_tiles_of_a_tiled_schedule():
    sch = pl.auto_schedule(stencil, tile=3)
    fig = viz.plot_iteration_space(sch, params={"n": 10}, group_depth=2)
    assert "9 groups" in fig.axes[0].texts[0].get_text()    # 9 points per side: 3 x 3 tiles


def test_schedule_basis_keeps_arrows_between_the_same_instances():
    sch = pl.auto_schedule(stencil, tile=None)
    fig = viz.plot_schedule(sch, params={"n": 8})
    assert points_drawn(fig) == 49
    assert arrows_drawn(fig) == 2 * 7 * 6
    xs = sorted({x for x, _ in fig.axes[0].collections[0].get_offsets()})
    assert xs == list(range(2, 15))       # the wavefront value i + j runs along the x axis


def test_two_dims_of_a_deeper_domain():
    fig = viz.plot_iteration_space(matmul, params={"n": 4}, dims=("i", "k"))
    assert points_drawn(fig) == 4 * 4 * 4          # every instance, projected onto (i, k)
    assert fig.axes[0].get_xlabel() == "i" and fig.axes[0].get_ylabel() == "k"
    assert arrows_drawn(fig) == 4 * 3               # direct k -> k + 1 dependences, deduplicated


def test_errors():
    with pytest.raises(pl.PolyloopError, match="size parameter"):
        viz.plot_iteration_space(stencil, params={})
    with pytest.raises(pl.PolyloopError, match="no dimension 'q'"):
        viz.plot_iteration_space(matmul, params={"n": 3}, dims=("i", "q"))
    two = pl.script('def two(A: pl.Buffer[("n",), "float32"]):\n'
                    '    for i in range(n):\n        A[i] = 0.0\n'
                    '    for i in range(n):\n        A[i] += 1.0\n')
    with pytest.raises(pl.PolyloopError, match="choose one with statement="):
        viz.plot_iteration_space(two, params={"n": 3})
    fig = viz.plot_iteration_space(two, statement="A_1", params={"n": 3})
    assert points_drawn(fig) == 3


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(pl.PolyloopError, match=r"polyloop\[viz\]"):
        viz.plot_iteration_space(stencil, params={"n": 4})


def test_pl_viz_is_loaded_lazily():
    assert pl.viz.plot_schedule is viz.plot_schedule
