"""kedro-viz serves the lineage of every registered pipeline, and a real browser draws it.

One `make viz` server (`kedro viz run --env base`) is started for the module, on a free loopback port, in its
own process group: the web server runs in a child process, so teardown stops the whole group.
"""

import os

import numpy as np
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from tests.browser import WINDOW, lineage_graph_drawn, screenshot
from tests.fresh_clone import BIN
from tests.servers import VIZ_COMMAND, get_json, viz_port, viz_server
from tests.support import ROOT


def _environment() -> dict[str, str]:
    return os.environ | {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture(scope="module")
def viz_url(tmp_path_factory):
    with viz_server(ROOT, tmp_path_factory.mktemp("viz") / "server.log", _environment()) as url:
        yield url


def test_the_server_here_is_the_one_make_viz_starts():
    assert f"$(BIN)/kedro {' '.join(VIZ_COMMAND)} --port 4141" in (ROOT / "Makefile").read_text()


@pytest.fixture(scope="module")
def registered():
    bootstrap_project(ROOT)
    return dict(pipelines)


def _dataset_name(name: str) -> str:
    """kedro-viz shows a transcoded dataset (``name@format``) as one data node ``name``."""
    return name.split("@")[0]


def _label(api_node: dict) -> str:
    """Kedro's name for an API node: a task's `name` is shortened inside a namespace, `full_name` is not."""
    return api_node.get("full_name") or api_node["name"]


def test_api_lists_every_pipeline(viz_url, registered):
    listed = {entry["id"] for entry in get_json(f"{viz_url}/api/main")["pipelines"]}
    assert set(registered) <= listed, f"pipelines missing from kedro-viz: {set(registered) - listed}"


def test_api_shows_every_node_dataset_and_edge_of_every_pipeline(viz_url, registered):
    problems = []
    for name, pipeline in registered.items():
        graph = get_json(f"{viz_url}/api/pipelines/{name}")
        label = {node["id"]: _label(node) for node in graph["nodes"]}
        tasks = {_label(node) for node in graph["nodes"] if node["type"] == "task"}
        datasets = {node["name"] for node in graph["nodes"] if node["type"] in ("data", "parameters")}
        edges = {(label[edge["source"]], label[edge["target"]]) for edge in graph["edges"]}
        expected_tasks = {node.name for node in pipeline.nodes}
        expected_datasets = {_dataset_name(dataset) for dataset in pipeline.datasets()}
        expected_edges = {
            pair
            for node in pipeline.nodes
            for pair in [(_dataset_name(i), node.name) for i in node.inputs]
            + [(node.name, _dataset_name(o)) for o in node.outputs]
        }
        for kind, expected, shown in (
            ("nodes", expected_tasks, tasks),
            ("datasets/parameters", expected_datasets, datasets),
            ("edges", expected_edges, edges),
        ):
            if expected != shown:
                problems.append(f"{name} {kind}: missing {sorted(expected - shown)}, extra {sorted(shown - expected)}")
    assert not problems, "\n".join(problems)


def test_browser_draws_the_lineage_graph(viz_url, tmp_path):
    drawn, measured = lineage_graph_drawn(screenshot(f"{viz_url}/", tmp_path))
    assert drawn, f"the kedro-viz page looks blank ({tmp_path / 'page.png'}): {measured}"


def test_a_blank_page_that_renders_does_not_pass_the_screenshot_check(tmp_path):
    blank = screenshot("about:blank", tmp_path)
    assert blank is not None, "Chromium wrote no screenshot of about:blank: the check was never exercised"
    drawn, measured = lineage_graph_drawn(blank)
    assert not drawn, f"about:blank passed as a drawn graph: {measured}"


def test_a_page_that_fails_to_load_does_not_pass_the_screenshot_check(tmp_path):
    """Older Chromium draws a white error page here, Chromium 156 writes no file: neither is a graph."""
    drawn, measured = lineage_graph_drawn(screenshot(f"http://127.0.0.1:{viz_port()}/", tmp_path))
    assert not drawn, f"a refused connection passed as a drawn graph: {measured}"


def test_a_missing_screenshot_is_nothing_drawn():
    drawn, measured = lineage_graph_drawn(None)
    assert not drawn and "no screenshot" in measured


def test_an_empty_graph_panel_does_not_pass_the_screenshot_check():
    """The app shell without its graph: a busy sidebar beside an empty dark panel."""
    rng = np.random.default_rng(0)
    shell = np.full((WINDOW[1], WINDOW[0], 3), 15, dtype=np.uint8)
    shell[:, :480] = rng.integers(0, 256, size=(WINDOW[1], 480, 3), dtype=np.uint8)
    drawn, measured = lineage_graph_drawn(shell)
    assert not drawn, measured
