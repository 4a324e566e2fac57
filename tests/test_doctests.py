# SPDX-License-Identifier: Apache-2.0
"""Every module's docstring examples run and print what they say (``python -m doctest`` style)."""
import doctest
import importlib
import pkgutil

import pytest

import polyloop

MODULES = sorted(m.name for m in pkgutil.walk_packages(polyloop.__path__, "polyloop."))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # examples that write files write them here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=FLAGS, report=True, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
