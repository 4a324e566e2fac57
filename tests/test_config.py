# SPDX-License-Identifier: Apache-2.0
"""config: POLYLOOP_COMPILE_TIMEOUT is read once, as a positive number of seconds."""
from __future__ import annotations

import pytest

from polyloop import config


@pytest.mark.parametrize("text, want", [("", config.DEFAULT_COMPILE_TIMEOUT), ("2.5", 2.5),
                                        (" 60 ", 60.0)])
def test_the_compile_timeout_is_read_from_the_environment(monkeypatch, text, want):
    monkeypatch.setenv("POLYLOOP_COMPILE_TIMEOUT", text)
    assert config.load().compile_timeout == want


@pytest.mark.parametrize("text", ["0", "-3", "soon", "inf", "nan"])
def test_an_invalid_compile_timeout_is_ignored_with_a_warning(monkeypatch, text):
    monkeypatch.setenv("POLYLOOP_COMPILE_TIMEOUT", text)
    with pytest.warns(RuntimeWarning, match="POLYLOOP_COMPILE_TIMEOUT"):
        assert config.load().compile_timeout == config.DEFAULT_COMPILE_TIMEOUT
