"""The import graph of ``fdsml``'s packages, read from the source (the AST), runtime imports only: a name imported
under ``if TYPE_CHECKING:`` is an annotation, not a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import PACKAGE


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
