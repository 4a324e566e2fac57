# SPDX-License-Identifier: Apache-2.0
"""The summary of ``benchmarks/bench_zoo.py`` (ratios, geometric means, the worst model, builds
slower than torch.compile's first call) and its cold-cache switch, without timing a model."""
from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the zoo harness needs torch (extra 'test')")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_zoo.py"


@pytest.fixture(scope="module")
def zoo():
    saved_env, saved_path = dict(os.environ), list(sys.path)
    spec = importlib.util.spec_from_file_location("bench_zoo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path


def outcome(zoo, name, **seconds):
    o = zoo.Outcome(name, "onnx", stage="matches")
    o.seconds.update(seconds)
    return o


def test_summary_gives_geomean_and_worst_model_per_reference(zoo):
    outcomes = [outcome(zoo, "a", call=0.010, ort=0.020, openvino=0.005, built=3.0,
                        compile_first=5.0),
                outcome(zoo, "b", call=0.040, ort=0.010, openvino=0.040, built=9.0,
                        compile_first=4.0),
                outcome(zoo, "c", call=0.010, built=1.0)]       # no reference timed
    lines = zoo.summary(outcomes)
    ort = next(line for line in lines if "ONNX Runtime" in line)
    assert f"geomean {math.sqrt(2.0 * 0.25):.2f}x over 2" in ort
    assert "worst 0.25x (b)" in ort
    ov = next(line for line in lines if "OpenVINO" in line)
    assert f"geomean {math.sqrt(0.5):.2f}x over 2" in ov and "worst 0.50x (a)" in ov
    assert not any("eager" in line for line in lines)
    assert lines[-1] == "build slower than torch.compile's first call: b"


def test_ratio_cells_say_which_engine_is_faster(zoo):
    o = outcome(zoo, "a", call=0.004, ort=0.006)
    assert zoo._x(zoo._ratio(o, "ort")) == "1.50x"
    assert zoo._x(zoo._ratio(o, "openvino")) == "-"


def test_cold_cache_is_a_new_empty_folder_that_is_removed(zoo):
    from polyloop import config
    saved = config.CONFIG
    try:
        folder = zoo.empty_cache()
        assert config.CONFIG.cache_dir.parent == Path(folder.name)
        assert not any(Path(folder.name).iterdir())
        folder.cleanup()
        assert not Path(folder.name).exists()
    finally:
        config.CONFIG = saved
