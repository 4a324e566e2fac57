# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the whole test session compiles into a temporary cache, never the user's.

Tests that count compilations or need an empty cache use ``fresh_cache``.
"""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from polyloop import config


@pytest.fixture(scope="session", autouse=True)
def session_cache(tmp_path_factory: pytest.TempPathFactory):
    """Compile into a temporary cache for the whole session; restore the setting afterwards."""
    saved = config.CONFIG
    config.CONFIG = dataclasses.replace(saved, cache_dir=tmp_path_factory.mktemp("cache"))
    yield config.CONFIG.cache_dir
    config.CONFIG = saved


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache directory for one test."""
    path = tmp_path / "cache"
    monkeypatch.setattr(config, "CONFIG", dataclasses.replace(config.CONFIG, cache_dir=path))
    return path


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Fresh random data per test, reproducible from the test's name."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def extern_routes():
    """Extern functions a test registers (``pl.graph.register_extern`` routes every later call
    of that operator) end with the test: the next test's graphs compile their own kernels."""
    from polyloop.graph import extern
    saved = dict(extern._REGISTRY)
    yield
    extern._REGISTRY.clear()
    extern._REGISTRY.update(saved)
