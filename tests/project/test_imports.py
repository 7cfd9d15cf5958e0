"""Imports point down: no two packages of ``fdsml`` import each other, directly or through others
(the graph of runtime imports: tests/project/import_graph.py)."""

from __future__ import annotations

import pytest

from tests.project.import_graph import package_graph


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
    # commands: `python -m fdsml.plan` refuses what a run's checks before work refuse (fdsml.pipelines.run_checks);
    # `python -m fdsml.stage_code` reads the pipelines' packages and their sections' parsers
    above = {"fdsml.pipelines", "fdsml.pipeline_registry", "fdsml.settings", "fdsml.hooks", "fdsml.cli", "fdsml.__main__", "fdsml.plan", "fdsml.stage_code"}
    importers = sorted(name for name, targets in graph.items() if "fdsml.pipelines" in targets and name not in above)
    assert not importers, f"core packages importing fdsml.pipelines: {importers}"
