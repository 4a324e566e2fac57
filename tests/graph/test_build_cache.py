# SPDX-License-Identifier: Apache-2.0
"""The whole-model cache: a rebuild generates no code and still gives PyTorch's result; a
changed weight, thread count, C flag, compiler, polyloop source or tuning database misses it."""
from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import polyloop as pl
from polyloop import config, driver
from polyloop.graph import Op
from polyloop.runtime.records import Database, Record

build_module = importlib.import_module("polyloop.graph.build")


def scaled_relu(w: np.ndarray) -> pl.graph.Graph:
    b = pl.graph.GraphBuilder("scaled_relu")
    x = b.input("x", ("n", w.shape[0]))
    return b.build(b.emit(Op.RELU, b.emit(Op.MUL, x, b.constant(w, "w"))))


def _forbid(monkeypatch, *names: str) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("a cached rebuild generated code")
    monkeypatch.setattr(driver, "c_kernel", refuse)
    for name in names:
        monkeypatch.setattr(build_module, name, refuse)


def test_cached_rebuild_generates_no_code_and_equals_pytorch(seed_cnn, monkeypatch):
    torch = pytest.importorskip("torch", reason="the seed CNN is a PyTorch model")
    model, first = seed_cnn
    g = pl.graph.from_torch(model, (torch.randn(4, 1, 28, 28),), batch="batch")
    _forbid(monkeypatch, "compile_c_units", "weight_blob", "lower_kernel", "default_schedule",
            "entry_source")
    again = pl.graph.build(g)
    x = torch.randn(3, 1, 28, 28)
    out = np.full((3, 10), np.nan, "float32")
    again(x.numpy(), out=(out,))
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)
    assert again.library.path == first.library.path


def test_the_cache_lives_in_the_configured_directory(fresh_cache, rng):
    w = rng.standard_normal(5).astype("float32")
    pl.graph.build(scaled_relu(w))
    assert len(list((fresh_cache / "models").glob("*.json"))) == 1
    assert len(list((fresh_cache / "weights").glob("*.bin"))) == 1


def test_a_changed_weight_misses_the_cache(rng):
    w = rng.standard_normal(7).astype("float32")
    first = pl.graph.build(scaled_relu(w))
    w2 = w.copy()
    w2[-1] = -w2[-1]
    second = pl.graph.build(scaled_relu(w2))
    x = rng.standard_normal((3, 7)).astype("float32")
    np.testing.assert_allclose(first(x), np.maximum(x * w, 0), rtol=1e-6)
    np.testing.assert_allclose(second(x), np.maximum(x * w2, 0), rtol=1e-6)
    assert second.blob_path != first.blob_path


def test_the_weights_digest_sees_values_dtype_and_shape():
    w = np.arange(8, dtype="float32")
    base = build_module.weights_digest(scaled_relu(w))
    changed = w.copy()
    changed[3] = np.nextafter(changed[3], np.float32(10))
    assert build_module.weights_digest(scaled_relu(changed)) != base
    as_int = w.view("int32")     # the same bytes under another dtype
    g = scaled_relu(w)
    g_int = g.replace(constants=(dataclasses.replace(
        g.constants[0], value=dataclasses.replace(g.constants[0].value, type=pl.graph.TensorType(
            (8,), "int32")), data=as_int),))
    assert build_module.weights_digest(g_int) != base
    g_2d = g.replace(constants=(dataclasses.replace(g.constants[0], data=w.reshape(2, 4)),))
    assert build_module.weights_digest(g_2d) != base


def test_options_threads_compiler_sources_and_database_change_the_key(monkeypatch, tmp_path):
    g = scaled_relu(np.ones(4, "float32"))
    digest = build_module.weights_digest(g)

    def key(db=None):
        return build_module.model_key(g, digest, db)
    base = key()
    assert key() == base
    with monkeypatch.context() as m:
        m.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, cflags=("-O1",)))
        assert key() != base
    with monkeypatch.context() as m:       # schedules are chosen for the thread count
        threads = config.CONFIG.threads + 1
        m.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, num_threads=threads))
        assert key() != base
    with monkeypatch.context() as m:
        m.setattr(build_module, "compiler_version", lambda cc: "gcc (other) 99.1")
        assert key() != base
    with monkeypatch.context() as m:
        m.setattr(build_module, "_code_version", lambda: "another polyloop")
        assert key() != base
    db = Database(tmp_path / "tune")
    with_db = key(db)
    assert with_db != base
    db.add(Record(workload="w", trace="[]", times=(1e-3,)))
    assert key(db) != with_db


def test_a_damaged_manifest_is_rebuilt(fresh_cache, rng):
    w = rng.standard_normal(3).astype("float32")
    pl.graph.build(scaled_relu(w))
    for manifest in (fresh_cache / "models").glob("*.json"):
        manifest.write_text('{"library": ')
    ex = pl.graph.build(scaled_relu(w))
    x = rng.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(ex(x), np.maximum(x * w, 0), rtol=1e-6)
