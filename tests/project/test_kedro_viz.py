"""kedro-viz serves the lineage of every registered pipeline, and a real browser draws it.

One `kedro viz run` server is started for the module, on a free loopback port, in its own process
group: the web server runs in a child process, so teardown stops the whole group.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from kedro.framework.project import pipelines
from kedro.framework.startup import bootstrap_project
from PIL import Image

from .dependencies import require_program

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STARTUP_TIMEOUT_S = 120
VIZ_MAX_PORT = 49151
WINDOW = (1400, 900)
# Inside the graph panel at WINDOW size, clear of the sidebar (x < 480), the release banner (top
# right), the guided-tour popup (bottom right) and the minimap (bottom left): (left, top, right, bottom).
GRAPH_BOX = (500, 40, 1000, 640)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",  # without it the screenshot is taken before the graph is laid out
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
INSTALL_HINT = "Chromium is not installed: `apt-get install -y chromium` (Debian) enables this browser check"


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


def _stop_group(process: subprocess.Popen) -> None:
    """Stop the process and every child it started (they share its process group)."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def viz_url(tmp_path_factory):
    port = _free_port()
    log_path = tmp_path_factory.mktemp("viz") / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [str(BIN / "kedro"), "viz", "run", "--no-browser", "--host", "127.0.0.1", "--port", str(port)],
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
        _stop_group(server)


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


def lineage_graph_drawn(image: np.ndarray | None) -> tuple[bool, str]:
    """Whether an RGB kedro-viz screenshot shows a drawn graph, with the measurements that decided it.

    No screenshot (``None``) means nothing was drawn: Chromium 156 writes no file for a page that
    failed to load. Otherwise the page must not be blank (many colours), the graph panel must have kedro-viz's dark canvas
    (Chromium's error page and ``about:blank`` are white) and enough of the panel must be drawn on
    (the app shell before layout leaves the panel empty).
    """
    if image is None:
        return False, "Chromium wrote no screenshot: nothing was drawn"
    pixels = image.astype(np.int32)
    packed = pixels[..., 0] << 16 | pixels[..., 1] << 8 | pixels[..., 2]
    colours = len(np.unique(packed))
    left, top, right, bottom = GRAPH_BOX
    values, counts = np.unique(packed[top:bottom, left:right], return_counts=True)
    background = (values[counts.argmax()] >> np.array([16, 8, 0])) & 0xFF
    panel = pixels[top:bottom, left:right].reshape(-1, 3)
    drawn = float((np.abs(panel - background).max(axis=1) > 32).mean())
    verdict = colours > 50 and background.mean() < 64 and drawn > 0.005
    return verdict, f"{colours} colours, panel background {background.tolist()}, {drawn:.4f} of the panel drawn"


def _screenshot(url: str, folder: Path) -> np.ndarray | None:
    """The page as RGB pixels, or None when Chromium wrote no screenshot (a page that did not load)."""
    chromium = require_program("chromium", INSTALL_HINT)
    folder.mkdir(parents=True, exist_ok=True)
    picture = folder / "page.png"
    browser = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'profile'}", f"--screenshot={picture}", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        browser.wait(timeout=120)
    finally:
        _stop_group(browser)
    if not picture.exists():
        return None
    return np.asarray(Image.open(picture).convert("RGB"))


def test_browser_draws_the_lineage_graph(viz_url, tmp_path):
    drawn, measured = lineage_graph_drawn(_screenshot(f"{viz_url}/", tmp_path))
    assert drawn, f"the kedro-viz page looks blank ({tmp_path / 'page.png'}): {measured}"


def test_a_blank_page_that_renders_does_not_pass_the_screenshot_check(tmp_path):
    blank = _screenshot("about:blank", tmp_path)
    assert blank is not None, "Chromium wrote no screenshot of about:blank: the check was never exercised"
    drawn, measured = lineage_graph_drawn(blank)
    assert not drawn, f"about:blank passed as a drawn graph: {measured}"


def test_a_page_that_fails_to_load_does_not_pass_the_screenshot_check(tmp_path):
    """Older Chromium draws a white error page here, Chromium 156 writes no file: neither is a graph."""
    drawn, measured = lineage_graph_drawn(_screenshot(f"http://127.0.0.1:{_free_port()}/", tmp_path))
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
