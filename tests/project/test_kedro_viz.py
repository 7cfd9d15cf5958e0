"""kedro-viz serves the lineage of every registered pipeline, and a real browser draws it.

One `kedro viz run` server is started for the module, on a free loopback port, in its own process
group: the web server runs in a child process, so teardown stops the whole group.
"""

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project

from tests.browser import WINDOW, lineage_graph_drawn, screenshot
from tests.fresh_clone import BIN
from tests.servers import stop_group
from tests.support import ROOT

STARTUP_TIMEOUT_S = 120
VIZ_MAX_PORT = 49151


def _environment() -> dict[str, str]:
    return os.environ | {
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "KEDRO_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
    }


def _free_port() -> int:
    """A free loopback port that kedro-viz accepts: it refuses ports above 49151."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port <= VIZ_MAX_PORT:
            return port
    raise RuntimeError(f"no free loopback port at or below {VIZ_MAX_PORT}")


def _served_url(log_text: str) -> str | None:
    """The address kedro-viz announces: it moves to the next port when the one asked for is taken."""
    match = re.search(r"running at\s+(http://127\.0\.0\.1:\d+)", log_text)
    return match.group(1) if match else None


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def viz_url(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("viz") / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [str(BIN / "kedro"), "viz", "run", "--env", "base", "--no-browser", "--host", "127.0.0.1", "--port", str(port)],  # `make viz`
            cwd=ROOT,
            env=_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            url = _served_url(log_path.read_text())
            try:
                if url is not None:
                    _get_json(f"{url}/api/main")
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"kedro viz (asked for port {port}) did not answer:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        stop_group(server)


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
    listed = {entry["id"] for entry in _get_json(f"{viz_url}/api/main")["pipelines"]}
    assert set(registered) <= listed, f"pipelines missing from kedro-viz: {set(registered) - listed}"


def test_api_shows_every_node_dataset_and_edge_of_every_pipeline(viz_url, registered):
    problems = []
    for name, pipeline in registered.items():
        graph = _get_json(f"{viz_url}/api/pipelines/{name}")
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
    drawn, measured = lineage_graph_drawn(screenshot(f"http://127.0.0.1:{_free_port()}/", tmp_path))
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
