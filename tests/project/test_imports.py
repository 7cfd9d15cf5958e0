"""Imports point down: no two packages of ``fdsml`` import each other, directly or through others.

Read from the source (the AST), runtime imports only: a name imported under ``if TYPE_CHECKING:``
is an annotation, not a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "fdsml"


def _package(module: str) -> str:
    """``fdsml.<first part>``: a subpackage or a top-level module."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> set[str]:
    """The ``fdsml`` modules ``path`` imports at runtime."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    parts = ("fdsml", *path.relative_to(PACKAGE).with_suffix("").parts)
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(parts[: len(parts) - node.level + (path.name == "__init__.py")]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
    return {name for name in found if name.startswith("fdsml.")}


def package_graph() -> dict[str, set[str]]:
    """Each ``fdsml`` package and the other ``fdsml`` packages it imports."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = _package(".".join(("fdsml", *path.relative_to(PACKAGE).with_suffix("").parts)))
        graph.setdefault(source, set()).update(_package(name) for name in _imports(path))
    for source, targets in graph.items():
        targets.discard(source)
        targets.intersection_update(graph)
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def test_no_package_imports_one_that_imports_it_back():
    graph = package_graph()
    cycles = sorted(name for name in graph if name in _reachable(graph, name))
    assert not cycles, f"packages in an import cycle: {cycles}"


@pytest.mark.parametrize(("low", "high"), [("fdsml.evaluation", "fdsml.training"), ("fdsml.distributed", "fdsml.training")])
def test_the_lower_package_does_not_reach_the_higher(low, high):
    assert high not in _reachable(package_graph(), low)


def test_the_core_never_imports_the_pipelines():
    graph = package_graph()
    # commands: `python -m fdsml.plan` refuses what a run's checks before work refuse (fdsml.pipelines.run_checks)
    above = {"fdsml.pipelines", "fdsml.pipeline_registry", "fdsml.settings", "fdsml.hooks", "fdsml.cli", "fdsml.__main__", "fdsml.plan"}
    importers = sorted(name for name, targets in graph.items() if "fdsml.pipelines" in targets and name not in above)
    assert not importers, f"core packages importing fdsml.pipelines: {importers}"
