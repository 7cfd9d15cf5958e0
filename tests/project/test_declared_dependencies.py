"""What the project's code imports, pyproject.toml declares: a package another dependency happens to pull in today may
not come tomorrow (a plug-in's own dependencies are its package's, docs/plugins.md)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib

from tests.support import PACKAGE, ROOT


def imported_top_levels(folder) -> dict[str, str]:
    """Every top-level module the Python files under ``folder`` import (absolute imports), with one file importing it."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            )
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions pyproject.toml names: its dependencies and every extra's."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project.get("optional-dependencies", {}).values() for r in extra]
    return {normalised(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)) for requirement in requirements}


def undeclared(imports: dict[str, str], known: set[str], provided: dict[str, list[str]]) -> list[str]:
    """One line per imported module no declared distribution provides (the standard library and the project aside)."""
    lines = []
    for module, where in sorted(imports.items()):
        if module in sys.stdlib_module_names or module == PACKAGE.name:
            continue
        distributions = provided.get(module, [])
        if not any(normalised(name) in known for name in distributions):
            lines.append(f"{module} (imported by {where}): declare {' or '.join(distributions) or 'the package providing it'} in pyproject.toml")
    return lines


def test_every_package_the_code_imports_is_declared():
    missing = undeclared(imported_top_levels(PACKAGE), declared(), importlib.metadata.packages_distributions())
    assert not missing, "imported but not declared:\n" + "\n".join(missing)


def test_the_check_names_an_undeclared_import():
    imports = {"os": "a.py", "fdsml": "a.py", "yaml": "b.py", "skimage": "c.py"}
    provided = {"yaml": ["PyYAML"], "skimage": ["scikit-image"]}
    assert undeclared(imports, {"pyyaml"}, provided) == ["skimage (imported by c.py): declare scikit-image in pyproject.toml"]
