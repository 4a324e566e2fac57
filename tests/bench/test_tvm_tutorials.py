# SPDX-License-Identifier: Apache-2.0
"""Every port of ``benchmarks/tvm_tutorials/`` builds in polyloop and computes what NumPy
computes, at small sizes that do not divide the tiles, outputs poisoned (no TVM, no Loo.py:
their sides run only in the benchmark). No timing."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TUTORIALS = ("opt_gemm", "templates", "conv2d", "reduction", "scan", "extern", "tensorize",
             "intrin_math", "mlc_ch2", "mlc_ch3", "mlc_ch4")


@pytest.fixture(scope="module")
def tutorials():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("tvm_tutorials.run")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("name", TUTORIALS)
def test_every_port_builds_and_matches_numpy(tutorials, name, rng):
    from tvm_tutorials.common import check
    ports = tutorials.load_ports([name], small=True)
    assert ports, f"{name} has no ports"
    for port in ports:
        inputs = port.inputs(rng)
        built = tutorials.build_polyloop(port, inputs)   # outputs passed in poisoned
        check(port, "polyloop", built.outputs(), inputs)
        assert port.tvm is not None and port.tutorial and port.step


def test_the_loopy_kernels_build_and_match_numpy(tutorials, rng):
    from tvm_tutorials import loopy_ports
    rows = loopy_ports.loopy_rows([1], small=True, python=None, rng=rng)
    assert [r.name for r in rows] == ["double (C)", "double (OpenCL, PoCL)",
                                      "transpose (C)", "transpose (OpenCL, PoCL)"]
    assert all(r.theirs == "Loo.py not given (--loopy-python)" for r in rows)


def test_the_runner_times_and_prints_a_table(tutorials, capsys):
    tutorials.main(["--tutorials", "reduction", "--small", "--threads", "1", "--rounds", "1",
                    "--repeat", "1", "--no-tvm"])
    out = capsys.readouterr().out
    assert "row sum: rfactor, per row" in out and "polyloop ms" in out


def test_each_port_says_how_its_spelling_differs(tutorials):
    for name in TUTORIALS:
        doc = importlib.import_module(f"tvm_tutorials.{name}").__doc__
        assert "spelling differs" in doc or "differs from" in doc, name
