# SPDX-License-Identifier: Apache-2.0
"""The runtime imports only errors, config, util and the IR from polyloop (STYLE.md, layers)."""
import ast
from pathlib import Path

import polyloop.runtime

ALLOWED = ("polyloop.errors", "polyloop.config", "polyloop.util", "polyloop.ir", "polyloop.runtime")


def absolute_imports(path: Path) -> set[str]:
    package = "polyloop.runtime"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:
                found.update(f"{module}.{alias.name}" for alias in node.names)
            else:
                found.add(module)
    return found


def test_relative_imports_are_resolved():
    found = absolute_imports(Path(polyloop.runtime.__file__).parent / "compiler.py")
    assert {"polyloop.config", "polyloop.errors"} <= found


def test_runtime_imports_only_lower_layers():
    root = Path(polyloop.runtime.__file__).parent
    for path in sorted(root.glob("*.py")):
        for module in absolute_imports(path):
            if module.split(".")[0] == "polyloop":
                allowed = any(module == a or module.startswith(a + ".") for a in ALLOWED)
                assert allowed, f"{path.name} imports {module}"
