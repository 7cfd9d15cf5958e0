"""docs/architecture.md and the README's layout say what the code is: every package in its layer,
no import pointing up the layers, every package and top-level module of ``src/fdsml`` listed."""

from __future__ import annotations

import re

from tests.project.import_graph import package_graph
from tests.support import PACKAGE, ROOT



def documented_layers(page: str) -> dict[str, int]:
    """``{"fdsml.<name>": layer}`` from the first code block after ``## The layers`` (0 = the top)."""
    block = page.split("## The layers", 1)[1].split("```", 2)[1]
    layers: dict[str, int] = {}
    for depth, line in enumerate(row for row in block.splitlines() if ":" in row):
        for name in line.split(":", 1)[1].split(","):
            layers[f"fdsml.{name.strip()}"] = depth
    return layers


def upward_imports(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """``importer -> imported`` for every import of a package in a higher layer than the importer's."""
    return sorted(f"{source} -> {target}" for source, targets in graph.items() for target in targets if layers[target] < layers[source])


def packages() -> set[str]:
    """Every subpackage and top-level module of fdsml (``__init__`` aside)."""
    return set(package_graph()) - {"fdsml.__init__"}


def test_every_package_has_one_layer_and_imports_point_down():
    layers = documented_layers((ROOT / "docs" / "architecture.md").read_text())
    assert sorted(packages() - set(layers)) == [], "packages docs/architecture.md's layers leave out"
    assert sorted(set(layers) - packages()) == [], "layers name packages that do not exist"
    graph = {name: targets - {"fdsml.__init__"} for name, targets in package_graph().items() if name in layers}
    assert upward_imports(graph, layers) == [], "imports pointing up docs/architecture.md's layers"


def test_the_readme_layout_lists_every_package_and_top_level_module():
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    listed = set(re.findall(r"^src/fdsml/(\w+)", layout, re.MULTILINE))
    expected = {name.removeprefix("fdsml.") for name in packages()}
    assert sorted(expected - listed) == [], "README's Layout leaves these out"
    assert all((PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file() for name in listed)


def test_the_check_finds_an_import_pointing_up():
    layers = documented_layers("## The layers\n\n```\ntop:    a\nbelow:  b, c\n```\n")
    assert layers == {"fdsml.a": 0, "fdsml.b": 1, "fdsml.c": 1}
    assert upward_imports({"fdsml.a": {"fdsml.b"}, "fdsml.b": {"fdsml.c"}, "fdsml.c": set()}, layers) == []
    assert upward_imports({"fdsml.a": set(), "fdsml.b": {"fdsml.a"}, "fdsml.c": set()}, layers) == ["fdsml.b -> fdsml.a"]
