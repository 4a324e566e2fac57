# SPDX-License-Identifier: Apache-2.0
"""The package imports only downwards (STYLE.md, "Layout: the tree reads as the pipeline").

Every ``import`` in every module of ``src/polyloop`` is parsed with ``ast`` (module level,
inside functions and under ``TYPE_CHECKING`` alike: a local import still is a dependency) and
resolved to the top-level unit it points to. An import may point to a strictly lower layer or
stay inside its own unit; it never points up, and never sideways to a sibling of the same layer
(``codegen`` does not import ``runtime``).
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import polyloop

ROOT = Path(polyloop.__file__).parent

# unit -> layer; a unit is a top-level module or subpackage of polyloop.
LAYERS: dict[str, int] = {
    "errors": 0, "config": 0, "util": 0,
    "ir": 1,
    "poly": 2,
    "frontend": 3, "schedule": 3,
    "lower": 4, "ops": 4, "intrin": 4,   # operator schedules, built-in tensor intrinsics
    "codegen": 5, "runtime": 5, "testing": 5,
    "driver": 6,
    "tune": 7,
    "graph": 8,     # above tune: pl.graph.tune spreads pl.tune's trials over a model's kernels
    "viz": 8, "bench": 8,
    "rpc": 9,       # rpc: devices (cross-built kernels, models, tuning)
    "cli": 10, "__init__": 10, "__main__": 10,
}

# `python -m polyloop` runs the command line: __main__.py is part of the cli unit, so its one
# import (polyloop.cli) is not a sideways edge.
SAME_UNIT = {"__main__": "cli"}

# Unit edges (importer, imported) that break the rule today, each reported to its owner. An
# entry is a bug, not a permission: its test is a strict xfail, so fixing the edge makes the test
# fail with "remove me". Do not add to it to get a change in; fix the layering instead.
# (2026-11-21: poly -> frontend and schedule -> frontend existed in HEAD and were fixed.)
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` (a module's dotted name) imports ``target`` at ``line``."""

    source: str
    target: str
    line: int

    @property
    def units(self) -> tuple[str, str]:
        return unit_of(self.source), unit_of(self.target)

    def __str__(self) -> str:
        a, b = self.units
        return (f"{self.source} (L{LAYERS.get(a, '?')} {a}) imports {self.target} "
                f"(L{LAYERS.get(b, '?')} {b}) at line {self.line}")


def module_name(path: Path) -> str:
    parts = ("polyloop",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 2 else parts)


def package_of(path: Path) -> str:
    """The package that relative imports in ``path`` are resolved against."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def is_module(dotted: str) -> bool:
    rel = Path(*dotted.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def unit_of(dotted: str) -> str:
    """``polyloop.codegen.c`` -> ``codegen``; the package itself is ``__init__``."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[Edge]:
    """The polyloop modules that ``path`` imports, resolved to absolute dotted names."""
    source, package = module_name(path), package_of(path)
    edges = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from . import x` names a submodule when x is one; otherwise an attribute of stem.
            targets = [f"{stem}.{a.name}" if is_module(f"{stem}.{a.name}") else stem
                       for a in node.names]
        else:
            continue
        edges += [Edge(source, t, node.lineno) for t in dict.fromkeys(targets)
                  if t == "polyloop" or t.startswith("polyloop.")]
    return edges


def all_edges() -> list[Edge]:
    return [e for path in sorted(ROOT.rglob("*.py")) for e in imports_of(path)]


def is_allowed(edge: Edge) -> bool:
    a, b = (SAME_UNIT.get(u, u) for u in edge.units)
    return a == b or LAYERS[b] < LAYERS[a]


def test_every_unit_has_a_layer():
    units = {unit_of(module_name(p)) for p in ROOT.rglob("*.py")}
    assert units <= LAYERS.keys(), f"units without a layer in STYLE.md: {units - LAYERS.keys()}"


def test_relative_imports_are_resolved():
    edges = imports_of(ROOT / "driver.py")
    targets = {e.target for e in edges}
    assert "polyloop.errors" in targets
    assert "polyloop.codegen" in targets      # imported inside build(): still a dependency
    assert all(e.source == "polyloop.driver" for e in edges)


def test_from_package_import_submodule_is_the_submodule():
    # `from .. import config` in runtime/ points to polyloop.config, not to polyloop/__init__.
    edges = imports_of(ROOT / "runtime" / "compiler.py")
    assert "polyloop.config" in {e.target for e in edges}
    assert "polyloop" not in {e.target for e in edges}


def test_rule_on_examples():
    assert is_allowed(Edge("polyloop.codegen.c", "polyloop.lower.lower", 1))
    assert is_allowed(Edge("polyloop.codegen.c", "polyloop.codegen.writer", 1))
    assert not is_allowed(Edge("polyloop.codegen.c", "polyloop.runtime", 1))  # sideways
    assert not is_allowed(Edge("polyloop.ir.expr", "polyloop.poly.deps", 1))  # upwards
    assert not is_allowed(Edge("polyloop.driver", "polyloop", 1))  # the public package is L10
    assert not is_allowed(Edge("polyloop.cli", "polyloop", 1))  # sideways within L10
    assert is_allowed(Edge("polyloop.__main__", "polyloop.cli", 1))  # the same unit


def _edge_params():
    reason = "known layering violation (see KNOWN_VIOLATIONS); when this passes, remove the entry"
    mark = pytest.mark.xfail(reason=reason, strict=True)
    known = [pytest.param(u, id=f"{u[0]}->{u[1]}", marks=mark) for u in sorted(KNOWN_VIOLATIONS)]
    return [pytest.param(None, id="no-new-violations")] + known


@pytest.mark.parametrize("unit_edge", _edge_params())
def test_imports_point_only_downwards(unit_edge):
    bad = [e for e in all_edges() if not is_allowed(e)]
    if unit_edge is None:
        new = [str(e) for e in bad if e.units not in KNOWN_VIOLATIONS]
        assert not new, "imports that break the layer order:\n" + "\n".join(new)
    else:
        still = [str(e) for e in bad if e.units == unit_edge]
        assert not still, "\n".join(still)


# Packages and modules where no function imports a polyloop module: a local import there would
# hide a circle (STYLE.md: "A local import to dodge a cycle means the layering is wrong").
NO_LOCAL_IMPORTS = ("ir", "lower/lower.py", "lower/prefetch.py", "schedule/rewrites.py",
                    "schedule/loops.py", "schedule/software_prefetch.py", "poly/affine.py",
                    "poly/isl_text.py")


def local_imports_of(path: Path) -> list[Edge]:
    """The polyloop imports of ``path`` made inside a function or method body."""
    local_lines = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local_lines |= {n.lineno for n in ast.walk(node)
                            if isinstance(n, (ast.Import, ast.ImportFrom))}
    return [e for e in imports_of(path) if e.line in local_lines]


def test_no_function_local_imports_of_polyloop_modules():
    paths = [p for where in NO_LOCAL_IMPORTS for p in (
        [ROOT / where] if where.endswith(".py") else sorted((ROOT / where).rglob("*.py")))]
    assert all(p.is_file() for p in paths)
    found = [str(e) for path in paths for e in local_imports_of(path)]
    assert not found, "function-local imports (fix the layering instead):\n" + "\n".join(found)


def test_modules_inside_ir_import_one_way():
    """No circle between the modules of ``ir``, at module level or anywhere else."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "ir").rglob("*.py")):
        graph[module_name(path)] = {e.target for e in imports_of(path)
                                    if e.target.startswith("polyloop.ir.")}
    done: set[str] = set()

    def visit(module: str, stack: tuple[str, ...]) -> None:
        assert module not in stack, "import circle: " + " -> ".join(stack + (module,))
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, stack + (module,))
        done.add(module)
    for module in graph:
        visit(module, ())


def test_local_import_check_sees_a_local_import(tmp_path, monkeypatch):
    probe = tmp_path / "probe.py"
    probe.write_text("from polyloop.ir import dtypes\n\n\ndef f():\n"
                     "    from polyloop.ir import expr\n")
    monkeypatch.setattr(sys.modules[__name__], "module_name", lambda p: "polyloop.ir.probe")
    assert [(e.target, e.line) for e in local_imports_of(probe)] == [("polyloop.ir.expr", 5)]
